"""What hashlock.Lock and hashlock.asyncio.Lock share: the options, the
owner, the holds and how an acquire reply updates them. No I/O here."""

import uuid
from typing import Any, Optional

from . import _protocol as p


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
        #: The fencing token of the latest acquisition (token=True), else None.
        self.token: Optional[int] = None
        self._holds = 0
        # The lock's own connection while KEEPALIVE-tied, else None.
        self._tied: Any = None
        # The watchdog (thread or task) while keepalive=False and held.
        self._watchdog: Any = None
        self._lost = False

    def _acquire_args(self, block: Optional[int]):
        return p.acquire_args(
            self.name, self.owner, self.lease_ms, self.keepalive, self.use_token, self.replicas, block
        )

    def _take(self, reply: Any) -> Optional[int]:
        """The hold count an acquire reply grants (None: not granted); keeps
        its token."""
        count, token = p.parse_acquire(reply, self.use_token)
        if count is not None and self.use_token:
            self.token = token
        return count

    @property
    def holds(self) -> int:
        """Holds this object has taken and not released, as last seen."""
        return self._holds

    @property
    def lost(self) -> bool:
        """True once the watchdog (keepalive=False) found the lock gone."""
        return self._lost

    def __repr__(self) -> str:
        return f"<{self._public_name} name={self.name!r} owner={self.owner!r} holds={self._holds}>"
