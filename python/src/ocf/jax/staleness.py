"""Noticing a :class:`~ocf.jax.trees.TreeState` whose tree training has replaced.

JAX arrays are immutable: a training step returns a new tree, and a holder
still holding the old one saves stale values. So a holder remembers (by
weak reference: it never keeps old arrays alive) the JAX arrays of the tree
it last saved or restored; a save that finds exactly those arrays again
warns with :class:`StaleTreeWarning`, because after any training step at
least one would be a new array. Saving the same state twice on purpose
(no step in between) warns too; ``warnings.simplefilter("error",
StaleTreeWarning)`` turns the warning into a refusal. Leaves that are not
JAX arrays (NumPy arrays, which can change in place) are not compared.
"""

from __future__ import annotations

import warnings
import weakref
from typing import Any

from ocf.jax._framework import jax


class StaleTreeWarning(UserWarning):
    """A TreeState is about to save the very arrays it saved or restored last:
    training probably replaced the tree without assigning ``holder.tree``.

    Examples:
        >>> warnings.simplefilter("error", ocf.jax.StaleTreeWarning)  # refuse instead
        >>> holder = ocf.jax.TreeState(state)
        >>> checkpoint = ocf.Checkpoint(state=holder)
        >>> state = train_step(state)
        >>> holder.tree = state  # without this, the next save warns (here: raises)
        >>> checkpoint.save("run/ckpt")
    """


class LeafMemory:
    """Weak references to the JAX arrays of the tree last saved or restored."""

    __slots__ = ("_refs",)

    def __init__(self) -> None:
        self._refs: list[weakref.ref[Any]] | None = None

    def remember(self, tree: Any) -> None:
        arrays = _arrays(tree)
        try:
            self._refs = [weakref.ref(array) for array in arrays]
        except TypeError:  # an array type without weak references: nothing to compare
            self._refs = None

    def warn_if_unchanged(self, tree: Any) -> None:
        """Warn when every JAX array of ``tree`` is one remembered, then remember them."""
        arrays = _arrays(tree)
        refs = self._refs
        if refs and len(refs) == len(arrays) and all(
                ref() is array for ref, array in zip(refs, arrays)):
            warnings.warn(StaleTreeWarning(
                f"this TreeState saves the same {len(arrays)} arrays it saved or restored "
                "last: a training step makes new arrays, so assign holder.tree = state "
                "after each step (or save with ocf.jax.TreeManager.save(step, state), "
                "which takes the tree itself)"), stacklevel=4)
        self.remember(tree)


def _arrays(tree: Any) -> list[Any]:
    return [leaf for leaf in jax.tree_util.tree_leaves(tree) if isinstance(leaf, jax.Array)]
