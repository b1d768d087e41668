"""Small corrections to Textual (pinned in pyproject.toml) that the app installs at start.

``Strip.divide`` caches its answer on the strip; when the only cut is at the strip's end the answer
is ``[the strip itself]``, so the strip refers to itself through its own cache. The compositor
divides every line it draws, so each line drawn unchanged across a region became a reference cycle
that only the garbage collector frees. Where the fleet panes freeze what survives a refresh
(``ui.fleet.FrozenSurvivors``), those cycles waited for the next full collection of ~250,000
objects (~150-190 ms with the GIL held at 4,096 GPUs): ~1,200 strips and ~17,000 objects they
held per 60 refreshes. The same answer without the cache entry costs a list comprehension.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from textual.strip import Strip

_installed = False


def install() -> None:
    """Apply the corrections once per process."""
    global _installed
    if _installed:
        return
    _installed = True
    divide = Strip.divide

    def divide_without_self_cycle(self: Strip, cuts: Iterable[int]) -> Sequence[Strip]:
        length = self.cell_length
        cuts = [cut for cut in cuts if cut <= length]
        if cuts == [length]:
            return [self]  # Textual's answer, not cached on the strip
        return divide(self, cuts)

    divide_without_self_cycle.__doc__ = divide.__doc__
    Strip.divide = divide_without_self_cycle
