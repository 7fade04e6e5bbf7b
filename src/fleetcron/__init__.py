"""fleetcron: cron for fleets of servers that never runs a job twice."""

import warnings
from importlib.metadata import PackageNotFoundError, version

# cryptography 51 deprecates DSA, and asyncssh names its DSA classes when it is imported, so
# every command printed five "DSA is deprecated" warnings before its own output. fleetcron
# never uses DSA keys (ssh-dss is refused by OpenSSH since 7.0); the filter matches only that
# message raised from asyncssh's modules, so any other deprecation still shows.
warnings.filterwarnings("ignore", message="DSA is deprecated", module=r"asyncssh\.")
# ldap3 (the LDAP log-in) imports pyasn1's encoder maps under their old names, which pyasn1
# 0.6.1 deprecates: the same kind of import-time noise, filtered as narrowly, from ldap3.
warnings.filterwarnings(
    "ignore",
    message=r"(tagMap|typeMap) is deprecated",
    category=DeprecationWarning,
    module=r"ldap3\.",
)

try:
    __version__ = version("fleetcron")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = ["__version__"]
