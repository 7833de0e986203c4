"""hashlock.Election (sync and asyncio) on Redis 7.0 and Valkey 9.1: terms
are fencing tokens, a leader's end elects the next candidate at once, the
old leader hears of it (on_revoked), and observers follow every change in
order from lifecycle events; a server without them is named at once."""

import asyncio
import queue
import threading
import time

import pytest
import redis.asyncio

import hashlock
import hashlock.asyncio as ha
from conftest import WAIT_S, wait_for
from servers import KINDS, Server
from test_sync import in_thread

TAKEOVERS = 200


def test_campaign_resign_leader_observe(server, r, key):
    seen = []
    a = hashlock.Election(r, key, on_elected=lambda t: seen.append(("elected", t)))
    b = hashlock.Election(server.client(), key)
    assert a.leader() is None
    with a.observe() as observer:
        term = a.campaign()
        assert a.is_leader and a.term == term and seen == [("elected", term)]
        assert a.leader() == hashlock.Leader(a.owner, term)
        assert a.campaign() == term  # already leading
        with pytest.raises(hashlock.NotAcquired):
            b.campaign(timeout=0.05)
        t, out = in_thread(lambda: b.campaign(timeout=WAIT_S))
        assert wait_for(lambda: len(r.execute_command("LOCK.WAITERS", key)) == 1)
        a.resign()
        t.join(WAIT_S)
        assert out["value"] > term and b.is_leader and not a.is_leader
        b.resign()
        changes = [observer.next(timeout=WAIT_S) for _ in range(4)]
    assert [c.kind for c in changes] == ["elected", "vacant", "elected", "vacant"]
    assert [c.leader for c in changes[::2]] == [hashlock.Leader(a.owner, term), hashlock.Leader(b.owner, out["value"])]
    assert a.leader() is None


@pytest.mark.module_feature
def test_200_forced_takeovers_one_leader_per_term(server, r, key):
    """Three candidates campaign in turn; the leader is taken over 200 times
    (its connection killed, or FORCERELEASE). Every term has one leader,
    terms only grow, each old leader hears it was revoked (at once: its
    connection's end, or the lock.forced event), and an observer sees every
    change of leader in order."""
    elected: "queue.Queue" = queue.Queue()
    stop = threading.Event()
    candidates = []
    revoked = {}

    def campaign_loop(e):
        while not stop.is_set():
            try:
                term = e.campaign(timeout=1)
            except hashlock.NotAcquired:
                continue
            except hashlock.HashlockError:
                continue
            revoked[e.owner] = threading.Event()
            elected.put((e, term, time.monotonic()))
            # Lead until revoked (then campaign again).
            while not stop.is_set() and e.is_leader:
                revoked[e.owner].wait(0.05)

    for _ in range(3):
        e = hashlock.Election(server.client(), key, on_revoked=lambda err, e=None: None)
        e.on_revoked = lambda err, e=e: revoked[e.owner].set()
        candidates.append(e)
    observed = []
    observer = hashlock.Election(r, key).observe(callback=observed.append)
    threads = [threading.Thread(target=campaign_loop, args=(e,), daemon=True) for e in candidates]
    for t in threads:
        t.start()
    terms = []
    previous = None
    try:
        for i in range(TAKEOVERS):
            leader, term, _ = elected.get(timeout=WAIT_S)
            assert terms == [] or term > terms[-1], "terms only grow"
            terms.append(term)
            if previous is not None:
                # The previous leader knows it is not leading any more.
                assert wait_for(lambda: not previous.is_leader, timeout=2), f"takeover {i}: old leader not revoked"
            assert hashlock.Lock(r, key).info().owner == leader.owner
            assert sum(1 for c in candidates if c.is_leader) <= 2  # itself and, briefly, the one being told
            # The observer follows before the next takeover.
            assert wait_for(lambda: any(c.kind == "elected" and c.leader.term == term for c in observed), timeout=5), f"observer missed term {term}"
            previous = leader
            if i % 2:
                assert r.execute_command("LOCK.FORCERELEASE", key) == 1
            else:
                host, port = leader._lock._tied.sock.getsockname()[:2]
                assert r.client_kill(f"{host}:{port}")
    finally:
        stop.set()
        for t in threads:
            t.join(5)
        observer.close()
    elected_terms = [c.leader.term for c in observed if c.kind == "elected"]
    assert elected_terms[: len(terms)] == terms  # every leader, in order
    kinds = [c.kind for c in observed]
    assert all(a != b for a, b in zip(kinds, kinds[1:]))  # elected and vacant alternate


@pytest.mark.parametrize("kind", KINDS)
def test_observe_without_events_says_so_at_once(kind, key):
    s = Server(kind, notify_keyspace_events="")
    try:
        with pytest.raises(hashlock.EventsDisabled, match="notify-keyspace-events Kd"):
            hashlock.Election(s.client(), key).observe()

        async def body():
            c = redis.asyncio.Redis(port=s.port)
            with pytest.raises(hashlock.EventsDisabled, match="notify-keyspace-events Kd"):
                async for _ in ha.Election(c, key).observe():
                    pass
            await c.aclose()

        asyncio.run(body())
        # Elections still work; only observing needs the events.
        e = hashlock.Election(s.client(), key)
        assert e.campaign() > 0
        e.resign()
    finally:
        s.stop()


def test_asyncio_election(server, key):
    async def body():
        c = redis.asyncio.Redis(port=server.port)
        a, b = ha.Election(c, key), ha.Election(redis.asyncio.Redis(port=server.port), key)
        revoked = asyncio.Event()
        a.on_revoked = lambda err: revoked.set()
        changes = []

        async def follow():
            async for change in a.observe():
                changes.append(change)
                if len(changes) == 3:
                    return

        follower = asyncio.ensure_future(follow())
        await asyncio.sleep(0.1)
        ta = await a.campaign()
        waiting = asyncio.ensure_future(b.campaign())
        await asyncio.sleep(0.05)
        assert await c.execute_command("LOCK.FORCERELEASE", key) == 1
        tb = await asyncio.wait_for(waiting, WAIT_S)
        await asyncio.wait_for(revoked.wait(), 2)  # the old leader heard at once
        assert tb > ta and not a.is_leader and b.is_leader
        await asyncio.wait_for(follower, WAIT_S)
        assert [ch.kind for ch in changes] == ["elected", "vacant", "elected"]
        assert [ch.leader.term for ch in changes if ch.leader] == [ta, tb]
        await b.resign()
        await c.aclose()

    asyncio.run(body())
