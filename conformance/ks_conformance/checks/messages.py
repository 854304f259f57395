"""The checker's messages by offset, with the settled ones moved off the heap (spec/checking.md section 1.1).

A message that is resolved, not outstanding and below both the cursor and the persisted cursor can change
again only if a later event names it (a stale ack, a duplicate delivery: judged with every fact kept) or a
restart resumes from a cursor persisted below it (after a cursor regression). So the log keeps such
messages in chunks of `chunk` consecutive offsets, marshalled and compressed in a temporary file, and brings
one back whole when it is named again: the checker's memory follows the live state (the messages from the
first unsettled one on), not the length of the trace, and every judgment stays exactly what it was.
"""

from __future__ import annotations

import marshal
import tempfile
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, overload

import pyarrow as pa

from ks_conformance.checks.records import Message

CHUNK = 4096
"""Offsets per archived chunk: large enough that compression pays, small enough that a revival is cheap."""
_FIELDS: Callable[[Message], tuple[Any, ...]] = eval(  # the source names only the fields of Message
    "lambda message: (" + ", ".join(f"message.{name}" for name in Message.__slots__) + ",)"
)
"""A message's fields as a tuple, in the order Message takes them (a settled message holds no Delivery).

A lambda naming each field, generated from `Message.__slots__` so that a new field is archived too: its attribute
reads are specialised by the interpreter, a third cheaper than `operator.attrgetter` over the same names."""
MARSHAL_VERSION = 2
"""The marshal format of the archive: 2 writes every value in full, without looking each one up to refer back."""
_CODEC = pa.Codec("zstd", compression_level=1)
"""How archived chunks are compressed: zstd (which pyarrow brings for Parquet) at level 1 is four times faster than
zlib's fastest level and makes them smaller."""


class MessageLog:
    """Every published message by offset; settled chunks archived, and a message named again revived alone."""

    def __init__(self, reset: Callable[[Message], None], chunk: int = CHUNK) -> None:
        self.by_offset: dict[int, Message] = {}
        """The live messages by offset (read it, never write it): where the checker's hot paths look first."""
        self.published = 0
        """How many messages were published (= `len(log)`, without the call)."""
        self._chunk = chunk
        self._archived = 0
        """Offsets below this are archived (those in `_revived` are live again)."""
        self._places: list[tuple[int, int, int, int]] = []
        """Per chunk (offset // chunk): its position and length in the file, its size uncompressed, and the restarts
        before it was written."""
        self._revived: dict[int, set[int]] = {}
        """Per archived chunk, its offsets live again (named since, or brought back by a restart)."""
        self._restarts = 0
        self._cache: tuple[int, int, list[Message]] | None = None
        """The chunk read last: (index, restarts when read, its messages), as a stale ack often has neighbours."""
        self._file: IO[bytes] | None = None
        self._reset = reset
        """What a restart does to a message (applied to one read back from before that restart)."""

    def __len__(self) -> int:
        return self.published

    def __bool__(self) -> bool:
        return self.published > 0

    def append(self, message: Message) -> None:
        """Add the next published message (its offset is the number published so far)."""
        self.by_offset[message.offset] = message
        self.published += 1

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            return [self[offset] for offset in range(*index.indices(self.published))]
        message = self.by_offset.get(index)
        if message is None:
            if not 0 <= index < self.published:
                raise IndexError(index)
            message = self._revive(index)
        return message

    def __iter__(self) -> Iterator[Message]:
        """Every message in offset order (archived ones revived: for small traces and tests)."""
        return (self[offset] for offset in range(self.published))

    def peek(self, offset: int) -> Message | None:
        """The message if it is live; None if it is archived (then it is resolved and not outstanding)."""
        return self.by_offset.get(offset)

    def live(self, offset: int) -> Message:
        """The message at `offset`, for one expected on the heap (unresolved ones are): the dict lookup alone."""
        message = self.by_offset.get(offset)
        return message if message is not None else self[offset]

    def live_messages(self) -> list[Message]:
        """The live messages (every message not archived), in no particular order."""
        return list(self.by_offset.values())

    @property
    def archived_below(self) -> int:
        """Offsets below this were archived: resolved and not outstanding (unless named since)."""
        return self._archived

    @property
    def live_count(self) -> int:
        """How many messages are on the heap."""
        return len(self.by_offset)

    def restarted(self, resume_from: int) -> None:
        """A restart: revive every archived message at or above `resume_from` (the restart may restore it), and
        count the restart so that a message read back later gets its reset too."""
        self._restarts += 1
        for index in range(resume_from // self._chunk, len(self._places)):
            first = index * self._chunk
            self._revive_offsets(index, range(max(first, resume_from), first + self._chunk))

    def settle(self, limit: int, settled: Callable[[Message], bool]) -> None:
        """Archive what lies below `limit` and is `settled`: whole new chunks, and revived messages settled again."""
        archived = False
        while self._archived + self._chunk <= limit:
            offsets = range(self._archived, self._archived + self._chunk)
            # A shard of keys holds only its keys' offsets: an offset of another shard is simply absent.
            messages = [message for offset in offsets if (message := self.by_offset.get(offset)) is not None]
            if not all(settled(message) for message in messages):
                break
            self._places.append(self._write(messages))
            for message in messages:
                del self.by_offset[message.offset]
            self._archived += self._chunk
            archived = True
        if archived and self._revived:
            for index, revived in list(self._revived.items()):
                if not revived or (max(revived) < limit and all(settled(self.by_offset[o]) for o in revived)):
                    messages = [self.by_offset.get(message.offset, message) for message in self._read(index)]
                    self._places[index] = self._write(messages)
                    self._cache = None
                    for offset in revived:
                        del self.by_offset[offset]
                    del self._revived[index]

    def close(self) -> None:
        """Delete the archive file."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def _write(self, messages: list[Message]) -> tuple[int, int, int, int]:
        # marshal format 2 (no back-references): half the time of the default format, and nothing to share here.
        raw = marshal.dumps([_FIELDS(message) for message in messages], MARSHAL_VERSION)
        data = _CODEC.compress(raw, asbytes=True)
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="ks-checker-")
        position = self._file.seek(0, 2)
        self._file.write(data)
        return position, len(data), len(raw), self._restarts

    def _read(self, index: int) -> list[Message]:
        if self._cache is not None and self._cache[:2] == (index, self._restarts):
            return self._cache[2]
        assert self._file is not None
        position, length, size, restarts = self._places[index]
        self._file.seek(position)
        raw = _CODEC.decompress(self._file.read(length), decompressed_size=size, asbytes=True)
        messages = [Message(*fields) for fields in marshal.loads(raw)]
        if restarts != self._restarts:
            for message in messages:
                self._reset(message)
        self._cache = (index, self._restarts, messages)
        return messages

    def _revive(self, offset: int) -> Message:
        self._revive_offsets(offset // self._chunk, (offset,))
        return self.by_offset[offset]

    def _revive_offsets(self, index: int, offsets: Iterable[int]) -> None:
        revived = self._revived.setdefault(index, set())
        wanted = {offset for offset in offsets if offset not in revived}
        if not wanted:
            return
        for message in self._read(index):
            if message.offset in wanted:
                self.by_offset[message.offset] = message
                revived.add(message.offset)
