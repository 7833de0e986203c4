"""What hashlock.Lock and hashlock.asyncio.Lock share: the options, the
owner, the holds, how an acquire reply updates them, and the lost state.
No I/O here."""

import uuid
from typing import Any, Callable, Optional

from . import _protocol as p
from .errors import LockLost


class LockBase:
    #: The name __repr__ shows.
    _public_name = "hashlock.Lock"

    def __init__(
        self,
        client: Any,
        name: Any,
        lease_ms: int = p.DEFAULT_LEASE_MS,
        keepalive: bool = True,
        token: bool = False,
        replicas: Any = None,
        owner: Optional[str] = None,
        on_lost: Optional[Callable[[LockLost], Any]] = None,
    ) -> None:
        if int(lease_ms) <= 0:
            raise ValueError("lease_ms must be a positive number of milliseconds")
        self._client = client
        self.name = name
        self.lease_ms = int(lease_ms)
        self.keepalive = keepalive
        self.use_token = token
        self.replicas = p.replicas_option(replicas)
        self.owner = owner if owner is not None else str(uuid.uuid4())
        #: Called (on the library's monitor thread, or as an asyncio callback)
        #: with a LockLost when a held lock is found lost.
        self.on_lost = on_lost
        #: The fencing token of the latest acquisition (token=True), else None.
        self.token: Optional[int] = None
        self._holds = 0
        # The lock's own connection while held on it (KEEPALIVE), else None.
        self._tied: Any = None
        # The loss watch of the current hold, else None.
        self._watch: Any = None
        # Its subscription to the key's lifecycle events, else None.
        self._events: Any = None
        self._lost: Optional[LockLost] = None
        # A loss the watch found while holds were taken, not yet seen by a
        # release() or an acquire() (which would be a re-entry: it raises).
        self._unacknowledged: Optional[LockLost] = None

    def _acquire_args(self, block: Optional[int], keepalive: Optional[bool] = None):
        return p.acquire_args(
            self.name,
            self.owner,
            self.lease_ms,
            self.keepalive if keepalive is None else keepalive,
            self.use_token,
            self.replicas,
            block,
        )

    def _acknowledge_loss(self) -> None:
        """An acquire() after the watch found the held lock lost, with no
        release() in between, is a re-entry of a lost lock: loud, once (as
        if the re-entry itself had found it gone)."""
        lost, self._unacknowledged = self._unacknowledged, None
        if lost is not None:
            raise lost

    def _take(self, reply: Any) -> Optional[int]:
        """The hold count an acquire reply grants (None: not granted); keeps
        its token."""
        count, token = p.parse_acquire(reply, self.use_token)
        if count is not None and self.use_token:
            self.token = token
        return count

    def _check_interval(self) -> float:
        """Seconds between the checks of a held lock: a third of the lease."""
        return self.lease_ms / 3000

    def _lost_error(self, why: str) -> LockLost:
        return LockLost(f"lock {self.name!r} held by {self.owner!r} was lost: {why}")

    @property
    def holds(self) -> int:
        """Holds this object has taken and not released, as last seen."""
        return self._holds

    @property
    def lost(self) -> bool:
        """True once the lock this object held was found lost (its KEEPALIVE
        connection closed or failed, or a check or renewal found it gone),
        until the next successful acquire."""
        return self._lost is not None

    @property
    def lost_reason(self) -> Optional[LockLost]:
        """The LockLost describing the loss, while `lost` is True."""
        return self._lost

    def __repr__(self) -> str:
        return f"<{self._public_name} name={self.name!r} owner={self.owner!r} holds={self._holds}>"
