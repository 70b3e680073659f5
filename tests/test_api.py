"""``__all__`` lists exactly the public names each module defines (house rule 3)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import skillsynth

# every public module, subpackages' modules included (skillsynth.cli.models, ...)
MODULES = [m.name.removeprefix("skillsynth.")
           for m in pkgutil.walk_packages(skillsynth.__path__, "skillsynth.")
           if not any(part.startswith("_") for part in m.name.split("."))]


def test_every_public_module_has_an_honest_all():
    assert {"cli", "cli.models", "evaluation.sweep", "corpora.tau2", "chat_models"} <= set(MODULES)
    for name in MODULES:
        mod = importlib.import_module(f"skillsynth.{name}")
        exported = set(getattr(mod, "__all__", ()))
        assert exported, f"skillsynth.{name} has no __all__"
        for n in exported:
            assert hasattr(mod, n), f"skillsynth.{name}.__all__ names missing {n}"
        defined = {n for n, obj in vars(mod).items()
                   if not n.startswith("_")
                   and (inspect.isclass(obj) or inspect.isfunction(obj))
                   and getattr(obj, "__module__", None) == mod.__name__}
        assert defined <= exported, f"skillsynth.{name} does not export {defined - exported}"


def test_package_all_resolves():
    for n in skillsynth.__all__:
        assert hasattr(skillsynth, n), n
