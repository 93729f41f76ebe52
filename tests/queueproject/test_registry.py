from collections.abc import Callable

import pytest

from queueproject.registry import Registry, UnknownName


def test_registry__register_get_and_names():
    reg: Registry[Callable[..., object]] = Registry("handler", "no_such_module_anywhere")

    @reg.register()
    def alpha(x):
        return x

    @reg.register("beta")
    def _b(x):
        return -x

    assert reg.get("alpha") is alpha
    assert reg.names() == ["alpha", "beta"]
    assert reg.choices() == [("alpha", "alpha"), ("beta", "beta")]
    with pytest.raises(UnknownName, match="known: alpha, beta"):
        reg.get("gamma")


def test_registry__a_name_cannot_be_taken_twice():
    reg: Registry[Callable[..., object]] = Registry("handler", "no_such_module_anywhere")
    reg.register("x")(lambda: 1)
    with pytest.raises(ValueError, match="already registered"):
        reg.register("x")(lambda: 2)
