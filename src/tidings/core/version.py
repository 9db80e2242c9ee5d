"""The version of tidings (as pyproject.toml names it), for `--version` and
`tidings_build_info`. Pure: a constant."""

VERSION = "0.1.0"
