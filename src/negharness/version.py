"""The package's version and the hook API's major version, in a module of their own so that every
room of the host can read them without importing the package root (whose `negharness.run` reaches
the engine); and an installed distribution's version, as records, fingerprints and build marks keep it."""

from importlib import metadata

__version__ = "0.1.0"

# The hook API's major version. A plugin module may set ``NEGHARNESS_HOOK_API = 1`` (the version it
# was written for); the host refuses it, by name, when that differs from this one.
HOOK_API = 1


def installed_version(dist: str) -> str | None:
    """The installed version of distribution ``dist`` from its metadata (nothing imported); None where it
    is not installed."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None
