"""Which release of GAIA (``amd-gaia`` on PyPI) is installed beside skillsynth, if any.

amd-gaia is an optional extra (``pip install 'skillsynth[gaia]'``): core skillsynth never
imports it. Run records name the installed release so a result can be tied to the GAIA it
was checked against; tests use GAIA's own ``MemoryStore`` as the schema oracle.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["GAIA_DISTILL_PROMPT_SHA256", "GAIA_DISTRIBUTION", "GAIA_INSTALL_HINT", "TESTED_GAIA_RANGE",
           "installed_gaia_version"]

#: The distribution name of the released GAIA.
GAIA_DISTRIBUTION = "amd-gaia"

#: The amd-gaia releases skillsynth's schema and tests were checked against (the ``gaia``
#: extra pins the same range).
TESTED_GAIA_RANGE = ">=0.25.1,<0.26"

#: sha256 of the tested release's distillation system prompt (``skill_synthesis``'s
#: ``DISTILL_SYSTEM_PROMPT``): the drift guard test fails when an installed release changes it.
GAIA_DISTILL_PROMPT_SHA256 = "1de01ee4adbacceb5c4f4fe6477271e88faaeb5b878a468eb7f86177c2850bf7"

#: What to run when a GAIA-only feature is asked for and amd-gaia is missing.
GAIA_INSTALL_HINT = "pip install 'skillsynth[gaia]'"


def installed_gaia_version() -> str | None:
    """The installed amd-gaia version (e.g. ``"0.25.1"``), or None when it is not installed.

    Reads the package metadata only; GAIA itself is not imported.
    """
    try:
        return version(GAIA_DISTRIBUTION)
    except PackageNotFoundError:
        return None
