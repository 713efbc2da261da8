"""User-facing errors.

Anything a user can cause by a bad config, a bad corpus or a bad command
line raises one of these. Command-line entry points catch them, print the
message as one line and exit with status 2; they never reach the user as a
traceback (unless ``--debug``).
"""


class UserError(Exception):
    """Bad input: the message names the file/key/value and says how to fix it."""

    exit_code = 2


class ConfigError(UserError):
    """A config or study file is malformed, has an unknown key or a bad value."""


class DataError(UserError):
    """A corpus is missing, unreadable, misaligned or empty."""
