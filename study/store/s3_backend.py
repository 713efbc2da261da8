"""The storage backend of S3 and S3-compatible stores (MinIO, Ceph, a test server): ``--storage
s3://bucket/prefix``, through boto3.

Credentials come from the standard AWS chain (environment, ``~/.aws``, an instance or pod role);
``AWS_ENDPOINT_URL`` points at an S3-compatible store. No error line repeats a credential: S3's
refusals are named by their code only.
"""

from __future__ import annotations

import time
from email.utils import parsedate_to_datetime

from study.store.object_backend import ObjectStore, Stamp, StorageError

SCHEME = "s3://"
CONFLICT_RETRIES = 3  # a conditional PUT answered 409 is sent again this many times


class S3Store(ObjectStore):
    """A bucket and key prefix of S3 or an S3-compatible store, through boto3."""

    uri_help = "s3:// (any S3-compatible store, with AWS_ENDPOINT_URL for one that is not AWS)"
    # where the store is: a trial worker on another node reaches the same endpoint and region as the driver
    worker_env = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION")

    def __init__(self, bucket: str, prefix: str = ""):
        self.bucket, self.prefix = bucket, prefix
        self.uri = f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"
        self._client = None

    @classmethod
    def check_uri(cls, uri):
        if not uri[len(SCHEME):].partition("/")[0]:
            raise StorageError(f"--storage {uri}: name a bucket, e.g. s3://my-bucket/studies")

    @classmethod
    def from_uri(cls, uri):
        bucket, _, prefix = uri[len(SCHEME):].partition("/")
        return cls(bucket, prefix.strip("/"))

    @property
    def client(self):
        if self._client is None:
            try:
                # boto3 loads only for s3:// storage: a local study never needs it
                import boto3
            except ImportError:
                raise StorageError(f"--storage {self.uri}: s3:// storage needs boto3; "
                                   "pip install 'rnmt-study[s3]'") from None
            # a session of its own: the credentials and endpoint are read from the environment now, not cached
            self._client = boto3.session.Session().client("s3")
        return self._client

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _call(self, what: str, key: str, action):
        """Run one request; S3's refusals become one line each (never the credentials)."""
        # botocore loads with boto3 (the client above), only for s3:// storage
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

        try:
            return action()
        except NoCredentialsError:
            raise StorageError(f"{self.uri}: no AWS credentials found (environment, ~/.aws or an instance role); "
                               "set AWS_PROFILE or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY") from None
        except ClientError as err:
            raise _client_error(self, what, key, err) from None
        except BotoCoreError as err:
            where = self.where(key) if key else self.uri
            raise StorageError(f"{where}: cannot {what} ({type(err).__name__}); check AWS_ENDPOINT_URL "
                               "and the network") from None

    def read(self, key):
        try:
            response = self._call("read", key, lambda: self.client.get_object(Bucket=self.bucket, Key=self._key(key)))
        except _Missing:
            return None
        return response["Body"].read()

    def _head(self, key):
        try:
            return self._call("read", key, lambda: self.client.head_object(Bucket=self.bucket, Key=self._key(key)))
        except _Missing:
            return None

    def version(self, key):
        head = self._head(key)
        return None if head is None else head["ETag"]

    def stamp(self, key):
        head = self._head(key)
        if head is None:
            return None
        # both times are the store's, in whole seconds: the true age may be up to a second more than their
        # difference, or up to a second less; the lower bound is what an expiry may trust
        answered = head.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
        try:
            age = (parsedate_to_datetime(answered) - head["LastModified"]).total_seconds() - 1
        except (TypeError, ValueError):  # none, or not an HTTP date
            raise StorageError(f"--storage {self.uri}: the store's answers carry no readable Date header, so its "
                               "clock cannot be read, which the study's lease needs; use a store that sends one") from None
        return Stamp(head["ETag"], max(age, 0.0))

    def write(self, key, data):
        self._call("write", key, lambda: self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data))

    def create(self, key, data):
        return self._put_if(key, data, IfNoneMatch="*")

    def replace_if(self, key, data, version):
        try:
            return self._put_if(key, data, IfMatch=version)
        except _Missing:
            return False

    def _put_if(self, key, data, **condition) -> bool:
        """A conditional PUT: False when its condition did not hold. S3 answers 409 when another conditional
        write of the key was under way at that moment, and asks for the request again."""
        for attempt in range(CONFLICT_RETRIES):
            try:
                return self._put_once(key, data, condition)
            except _Busy:
                time.sleep(0.2 * (attempt + 1))
        return self._put_once(key, data, condition)

    def _put_once(self, key, data, condition: dict) -> bool:
        try:
            self._call("write", key, lambda: self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data,
                                                                   **condition))
        except _Conflict:
            return False
        return True

    def keys(self, prefix=""):
        # a folder, as in a directory: "ray/a" must not list "ray/ab/..."
        start = f"{self._key(prefix.strip('/'))}/" if prefix else (f"{self.prefix}/" if self.prefix else "")
        found, token = [], None
        while True:
            extra = {"ContinuationToken": token} if token else {}
            page = self._call("list", prefix, lambda extra=extra: self.client.list_objects_v2(
                Bucket=self.bucket, Prefix=start, **extra))
            strip = len(self.prefix) + 1 if self.prefix else 0
            found += [item["Key"][strip:] for item in page.get("Contents", []) if not item["Key"].endswith("/")]
            token = page.get("NextContinuationToken")
            if not token:
                return sorted(found)

    def delete(self, key):
        self._call("delete", key, lambda: self.client.delete_object(Bucket=self.bucket, Key=self._key(key)))

    def check(self):
        self._call("reach", "", lambda: self.client.head_bucket(Bucket=self.bucket))


class _Missing(StorageError):
    """No such object (a read or a conditional write that found none)."""


class _Conflict(StorageError):
    """A conditional write whose condition did not hold."""


class _Busy(StorageError):
    """A conditional write refused while another one of the same key was under way (to be sent again)."""


def _code(err) -> str:
    return str(err.response.get("Error", {}).get("Code", ""))


def _client_error(store: S3Store, what: str, key: str, err) -> StorageError:
    code = _code(err)
    where = store.where(key) if key else store.uri
    if code in ("PreconditionFailed", "412"):
        return _Conflict(f"{where}: changed by another writer")
    if code in ("ConditionalRequestConflict", "409"):
        return _Busy(f"{where}: another conditional write of it was under way ({code}); run again")
    if code in ("NoSuchKey", "404", "NotFound") and code != "NoSuchBucket" and key:
        return _Missing(f"{where}: no such object")
    if code in ("NoSuchBucket", "404", "NotFound"):
        return StorageError(f"s3://{store.bucket}: the bucket does not exist; create it or correct --storage")
    if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403", "ExpiredToken",
                "InvalidToken"):
        return StorageError(f"{store.uri}: the storage refused these credentials ({code}) to {what}; check "
                            "AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY and the bucket's policy")
    return StorageError(f"{where}: cannot {what} ({code or type(err).__name__})")
