"""The built-in study files (``<name>.yaml``; ``multi30k/`` holds their Multi30k versions).

A package only so that the files are installed with the code (package data): a non-editable
install finds them through ``study.spec.model.SPACES_DIR``. There is no code here.
"""
