"""A stage slowed by a sitecustomize, so a kill lands mid-stage on any machine."""

from __future__ import annotations


def slow_down(module: str, function: str, seconds: float) -> str:
    """Source of a `sitecustomize` (on PYTHONPATH, so it also runs in spawned pool workers) that makes
    `module.function` take `seconds` longer, so a kill lands mid-stage on any machine. Timing only: the
    wrapped function computes and writes exactly what the real one does."""
    return f"""
import functools, importlib.abc, importlib.machinery, sys, time


class Slow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != {module!r}:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            real = getattr(module, {function!r})

            @functools.wraps(real)  # the same qualified name: pickle finds the wrapper
            def slow(*args, **kwargs):
                time.sleep({seconds!r})
                return real(*args, **kwargs)

            setattr(module, {function!r}, slow)  # looked up by name by its callers and by pickle

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, Slow())
"""
