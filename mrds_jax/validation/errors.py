"""The exception types of bad input (the family is drawn in :mod:`mrds_jax.validation`)."""


class InputError(ValueError):
    """Bad input to mrds_jax: the message names the item and the offending value."""


class ModelError(InputError):
    """Bad module description: names the link, joint, operational point or file."""


class ArgumentError(InputError):
    """Bad argument of a function: names the function, the argument and its value."""


class UnknownNameError(InputError, KeyError):
    """A name (link, module, operational point, ...) that does not exist."""

    def __str__(self):          # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class CheckpointError(InputError):
    """A checkpoint file that is damaged, foreign or missing; the message names the file."""


class SingularConfigurationWarning(UserWarning):
    """Bᶜ is (nearly) singular: redundant constraints or a singular configuration (Bonaventura §6.4)."""
