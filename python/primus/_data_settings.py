"""primus.data's settings: each the argument, else its PRIMUS_* variable (primus._env), else
its default, checked with an error that names where the bad value came from."""

from . import _env

SHUFFLES = ("none", "records", "blocks")
TRUE = ("1", "yes", "true")
FALSE = ("0", "no", "false")


def setting(value, variable, default=None):
    """(value, where it came from): the argument, else the variable, else the default."""
    if value is not None:
        return value, None
    text = _env.given(variable)
    if text is not None:
        return text, variable
    return default, None


def integer(value, argument, variable, low, high):
    name = variable or argument
    if isinstance(value, bool):
        raise TypeError(f"{name}: expected an integer, got {value!r}")
    if isinstance(value, str):
        try:
            value = int(value, 10)
        except ValueError:
            raise ValueError(f"{name}: expected an integer from {low} to {high}, got "
                             f"{value!r}") from None
    if not isinstance(value, int):
        raise TypeError(f"{name}: expected an integer, got {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(f"{name}: expected an integer from {low} to {high}, got {value}")
    return value


def boolean(value, argument, variable):
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in TRUE + FALSE:
        return value.lower() in TRUE
    raise ValueError(f"{variable or argument}: expected True or False (1/yes/true or "
                     f"0/no/false), got {value!r}")


def choice(value, argument, variable, choices):
    if value not in choices:
        raise ValueError(f"{variable or argument}: expected one of {', '.join(choices)}, got "
                         f"{value!r}")
    return value
