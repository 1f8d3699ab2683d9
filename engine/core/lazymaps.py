"""The lazy mappings of a decision: ``Decision.statuses`` (:class:`StatusMap`) and
``Decision.waiting`` (:class:`LazyMap`), each built on first access (the simulator calls
``decide()`` tens of thousands of times and reads few statuses), but behaving as a plain
read-only dict (equality, ``len``, iteration: ``statuses`` in workload-id order, ``waiting``
in queue order, each as the dict it stands for would be built).

Left interpreted when the core is compiled (:mod:`engine.accel`): compiled, a subclass of
``collections.abc.Mapping`` shared ``Mapping``'s isinstance caches, so a plain dict then
passed for a :class:`LazyMap`.
"""

from __future__ import annotations

from typing import Callable, Iterator, Mapping

from engine.core.types import WorkloadStatus


class StatusMap(Mapping[str, WorkloadStatus]):
    """Read-only mapping workload id -> status, each built lazily and cached. ``thunks()``
    returns the index, called on first use (the simulator reads no status, so a decision then
    never indexes its hundreds of workloads): it maps an id to ``(builder, *arguments)``, and
    the status is ``builder(*arguments)`` (a tuple costs less to make than a closure, for
    thousands of workloads per decision)."""

    def __init__(self, thunks: Callable[[], dict[str, tuple]]):
        self._make = thunks
        self._index: dict[str, tuple] | None = None
        self._done: dict[str, WorkloadStatus] = {}
        self._keys: list[str] | None = None  # sorted on first iteration

    @property
    def _thunks(self) -> dict[str, tuple]:
        if self._index is None:
            self._index = self._make()
        return self._index

    def __getitem__(self, key: str) -> WorkloadStatus:
        status = self._done.get(key)
        if status is None:
            fn, *args = self._thunks[key]
            status = self._done[key] = fn(*args)
        return status

    def __iter__(self) -> Iterator[str]:
        if self._keys is None:
            self._keys = sorted(self._thunks)
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._thunks)

    def __contains__(self, key: object) -> bool:
        return key in self._thunks

    def __repr__(self) -> str:
        return f"StatusMap({len(self)} workloads)"


class LazyMap(Mapping[str, str]):
    """Read-only mapping made by ``make()`` on first use (``Decision.waiting``: a shell that
    does not read it never pays for it)."""

    def __init__(self, make: Callable[[], dict[str, str]]):
        self._make: Callable[[], dict[str, str]] | None = make
        self._map: dict[str, str] = {}

    @property
    def _items(self) -> dict[str, str]:
        if self._make is not None:
            self._map, self._make = self._make(), None
        return self._map

    def __getitem__(self, key: str) -> str:
        return self._items[key]

    def plain(self) -> Mapping[str, str]:
        """The built dict itself, for fast lookups (read it, never change it)."""
        return self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)
