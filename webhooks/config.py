"""Settings from the environment (12-factor), parsed and validated once at start."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from webhooks import sealing
from webhooks.instance_file import generated_once
from webhooks.messaging.brokers import broker_parameters
from webhooks.durations import parse_seconds
from webhooks.messaging.ladder import DEFAULT_LADDER, Ladder
from webhooks.messaging.topology import Topology


#: What each whole-number setting must be, as its error message says it.
RETENTION_DAYS_RULE = "a whole number of days, at least 1"
TENANT_MAX_CONCURRENT_REQUESTS_RULE = "a whole number of requests, at least 1, or 0 for no limit"
TENANT_MAX_WAITING_REQUESTS_RULE = "a whole number of requests, at least 1, or 0 for no bound"
MAX_ENDPOINTS_PER_TENANT_RULE = "a whole number of endpoints, at least 1, or 0 for no limit"
#: AMQP's prefetch-count is a 16-bit field.
MAX_PREFETCH = 65_535
WORKER_PREFETCH_RULE = f"a whole number of messages from 1 to {MAX_PREFETCH:,}"


#: ``PROBE_INTERVAL``'s default: the first probe 5 s after an endpoint goes offline, then
#: ever less often as the outage goes on, at least every 3 minutes (``ProbeInterval``).
DEFAULT_PROBE_INTERVAL = "5s,3m"


@dataclass(frozen=True)
class ProbeInterval:
    """``PROBE_INTERVAL``: how soon an offline endpoint is first probed, and the longest wait
    between probes as the outage goes on (``webhooks.health.probes`` grows one into the other)."""

    #: Seconds from going offline to the first probe, and the shortest wait between probes.
    first: float = 5.0
    #: The longest wait between two probes (seconds), however long the outage.
    longest: float = 180.0

    @classmethod
    def parse(cls, text: str) -> "ProbeInterval":
        """``5s,3m`` (the first, the longest) or one duration (a fixed interval)."""
        parts = [part.strip() for part in text.split(",")]
        if len(parts) > 2:
            raise ValueError(f"PROBE_INTERVAL must be one duration or two, the first and the longest, such as 5s,3m "
                             f"(got {text!r})")
        try:
            first, longest = parse_seconds(parts[0]), parse_seconds(parts[-1])
        except ValueError as error:
            raise ValueError(f"PROBE_INTERVAL: {error}") from None
        if not 0 < first <= longest:
            raise ValueError(f"PROBE_INTERVAL must be above zero, the first no longer than the longest (got {text!r})")
        return cls(first, longest)


def _whole_number(name: str, text: str, rule: str) -> int:
    """``text`` as a whole number, or a ValueError naming the variable and its ``rule``."""
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name} must be {rule} (got {text!r})") from None


def _flag(name: str, text: str) -> bool:
    """``0`` or ``1``, or a ValueError naming the variable."""
    if text not in ("0", "1"):
        raise ValueError(f"{name} must be 0 or 1 (got {text!r})")
    return text == "1"


@dataclass(frozen=True)
class Settings:
    """Every knob the processes read; names match the environment variables."""

    database_url: str = "sqlite:///webhooks.db"
    amqp_url: str = "amqp://guest:guest@localhost:5672/%2F"
    queue_prefix: str = "webhooks"
    ladder: Ladder = field(default_factory=lambda: Ladder.parse(DEFAULT_LADDER))
    delivery_timeout: float = 15.0
    allow_private_targets: bool = False
    allowed_target_networks: str = ""
    secret_key: str | None = None
    #: Keys sealing secrets at rest, comma-separated, the sealing one first (``webhooks.sealing``);
    #: None: one generated once into ``instance/secrets_key``.
    secrets_key: str | None = field(default=None, repr=False)
    secret_rotation_overlap: float = 24 * 3600.0
    max_body_bytes: int = 262_144
    #: Events per second per tenant (single and batched alike); the bucket holds one second's worth.
    #: As high as the batch ingestion the service is built for (20,000 events/s in batches of 100),
    #: so a tenant sending batches is never held below what the web tier can take.
    ingest_rate_limit: float = 20_000.0
    #: Requests one client (one API key) may have running at once in each web process while
    #: alone, one while others are active (``webhooks.server.turns``); the rest wait their
    #: turn without a thread. 0: no limit but the threads.
    tenant_max_concurrent_requests: int = 4
    #: Whole requests of one client that may wait for their turn in each web process
    #: (``webhooks.server.turns``); one more is refused with 429. 0: no bound.
    tenant_max_waiting_requests: int = 128
    #: Deliveries per second one client (one API key) may make in each web process while another
    #: client is active (``webhooks.server.turns``): its next request waits until what its last
    #: ones made is paid for at this rate. A flood fanned out to many endpoints then feeds the
    #: broker and the workers no faster than a flood that is not. Two web processes at 500 make
    #: 1,000 a second, below what two workers on two cores deliver (1,000-1,300 a second in the
    #: flood benchmark): at 1,000 each, the flood outran the workers and the machine, and another
    #: tenant's p99 was 0.5-3.5 s (bench/RESULTS.md, 2026-11-27). 0: no pace.
    tenant_shared_delivery_rate: float = 500.0
    #: Seconds a client has to send a whole request (head and body) from its first byte, or to
    #: send a first byte on a new connection (``webhooks.server.worker``); then 408.
    request_read_timeout: float = 30.0
    #: Live endpoints one tenant may have (``POST /v1/endpoints`` beyond it: 409). 0: no limit.
    #: Each endpoint is a delivery of every event it subscribes to: this bounds a tenant's fan-out.
    max_endpoints_per_tenant: int = 100
    endpoint_max_in_flight: int = 128
    offline_after_failures: int = 5
    release_rate: float = 20.0
    probe_interval: ProbeInterval = field(default_factory=ProbeInterval)
    disable_after: float = 5 * 86400.0
    #: Days an event is kept, with its deliveries and attempts, after it and its last
    #: activity (``webhooks.storage.retention``); what still waits for delivery is never purged.
    retention_days: int = 30
    smtp_url: str | None = None
    #: Messages one worker process takes from the primary queue unacknowledged
    #: (``webhooks.delivery.budget``): up to half of them calls in flight, up to a quarter
    #: waiting in memory (beyond, the backlog moves to the database), the rest room for
    #: arrivals. 30,000 lets one process hold over 10,000 calls to slow endpoints in flight.
    worker_prefetch: int = 30_000
    publish_timeout: float = 1.0
    relay_grace: float = 10.0
    public_url: str = "http://localhost:8000"
    #: Peers whose ``X-Forwarded-For``/``-Proto`` are believed (``webhooks.pages.proxy``); the
    #: variable gunicorn reads for the same purpose, with gunicorn's default. ``*``: any peer.
    forwarded_allow_ips: str = "127.0.0.1,::1"
    #: Only types in the event-type catalog, not archived, may be posted (``webhooks.catalog``).
    event_types_strict: bool = False
    #: Seconds a web process keeps its copy of the catalog (schemas, archived types) before
    #: reading it again: a change made through another process applies within this long.
    event_types_cache: float = 5.0
    #: Seconds a portal session lasts from the moment its access link is opened (``webhooks.portal``).
    portal_session_ttl: float = 12 * 3600.0
    #: Space-separated origins that may show the portal in a frame; empty: none may.
    portal_frame_ancestors: str = ""
    #: The portal's product name, logo (https:// or a path here) and accent colour, on every page
    #: (checked by ``webhooks.portal.site`` when the web process starts).
    portal_brand_name: str = "Webhooks"
    portal_logo_url: str | None = None
    portal_accent: str = "#2b5fb3"

    def __post_init__(self) -> None:
        if self.portal_session_ttl <= 0:
            raise ValueError(f"PORTAL_SESSION_TTL must be a duration above zero (got {self.portal_session_ttl:g}s)")
        broker_parameters(self.amqp_url, self.publish_timeout)  # a bad AMQP_URL stops every process at start
        if self.secrets_key is not None:
            sealing.parse_keys(self.secrets_key)  # a malformed key stops every process at start
        if self.retention_days < 1:
            raise ValueError(f"RETENTION_DAYS must be {RETENTION_DAYS_RULE} (got {self.retention_days})")
        if not 1 <= self.worker_prefetch <= MAX_PREFETCH:
            raise ValueError(f"WORKER_PREFETCH must be {WORKER_PREFETCH_RULE} (got {self.worker_prefetch})")
        if self.max_endpoints_per_tenant < 0:
            raise ValueError(f"MAX_ENDPOINTS_PER_TENANT must be {MAX_ENDPOINTS_PER_TENANT_RULE} "
                             f"(got {self.max_endpoints_per_tenant})")
        if self.tenant_max_waiting_requests < 0:
            raise ValueError(f"TENANT_MAX_WAITING_REQUESTS must be {TENANT_MAX_WAITING_REQUESTS_RULE} "
                             f"(got {self.tenant_max_waiting_requests})")
        if self.tenant_shared_delivery_rate < 0:
            raise ValueError(f"TENANT_SHARED_DELIVERY_RATE must be deliveries per second, at least 0 "
                             f"(got {self.tenant_shared_delivery_rate:g})")
        if self.request_read_timeout <= 0:
            raise ValueError(f"REQUEST_READ_TIMEOUT must be a duration above zero (got {self.request_read_timeout:g}s)")
        if self.tenant_max_concurrent_requests < 0:
            raise ValueError(f"TENANT_MAX_CONCURRENT_REQUESTS must be {TENANT_MAX_CONCURRENT_REQUESTS_RULE} "
                             f"(got {self.tenant_max_concurrent_requests})")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> "Settings":
        """Build settings from ``env`` (default ``os.environ``); keyword overrides win."""
        env = os.environ if env is None else env
        base = cls(
            database_url=env.get("DATABASE_URL", cls.database_url),
            amqp_url=env.get("AMQP_URL", cls.amqp_url),
            queue_prefix=env.get("QUEUE_PREFIX", cls.queue_prefix),
            ladder=Ladder.parse(env.get("RETRY_LADDER", DEFAULT_LADDER)),
            delivery_timeout=float(env.get("DELIVERY_TIMEOUT", cls.delivery_timeout)),
            allow_private_targets=env.get("ALLOW_PRIVATE_TARGETS", "0") == "1",
            allowed_target_networks=env.get("ALLOWED_TARGET_NETWORKS", ""),
            secret_key=env.get("SECRET_KEY") or None,
            secrets_key=env.get("SECRETS_KEY") or None,
            secret_rotation_overlap=parse_seconds(env.get("SECRET_ROTATION_OVERLAP", "24h")),
            max_body_bytes=int(env.get("MAX_BODY_BYTES", cls.max_body_bytes)),
            ingest_rate_limit=float(env.get("INGEST_RATE_LIMIT", cls.ingest_rate_limit)),
            tenant_max_concurrent_requests=_whole_number(
                "TENANT_MAX_CONCURRENT_REQUESTS",
                env.get("TENANT_MAX_CONCURRENT_REQUESTS", str(cls.tenant_max_concurrent_requests)),
                TENANT_MAX_CONCURRENT_REQUESTS_RULE,
            ),
            tenant_max_waiting_requests=_whole_number(
                "TENANT_MAX_WAITING_REQUESTS",
                env.get("TENANT_MAX_WAITING_REQUESTS", str(cls.tenant_max_waiting_requests)),
                TENANT_MAX_WAITING_REQUESTS_RULE,
            ),
            tenant_shared_delivery_rate=float(env.get("TENANT_SHARED_DELIVERY_RATE",
                                                      cls.tenant_shared_delivery_rate)),
            request_read_timeout=parse_seconds(env.get("REQUEST_READ_TIMEOUT", "30s")),
            max_endpoints_per_tenant=_whole_number(
                "MAX_ENDPOINTS_PER_TENANT", env.get("MAX_ENDPOINTS_PER_TENANT", str(cls.max_endpoints_per_tenant)),
                MAX_ENDPOINTS_PER_TENANT_RULE,
            ),
            endpoint_max_in_flight=int(env.get("ENDPOINT_MAX_IN_FLIGHT", cls.endpoint_max_in_flight)),
            offline_after_failures=int(env.get("OFFLINE_AFTER_FAILURES", cls.offline_after_failures)),
            release_rate=float(env.get("RELEASE_RATE", cls.release_rate)),
            probe_interval=ProbeInterval.parse(env.get("PROBE_INTERVAL", DEFAULT_PROBE_INTERVAL)),
            disable_after=parse_seconds(env.get("DISABLE_AFTER", "5d")),
            retention_days=_whole_number("RETENTION_DAYS", env.get("RETENTION_DAYS", str(cls.retention_days)),
                                         RETENTION_DAYS_RULE),
            smtp_url=env.get("SMTP_URL") or None,
            worker_prefetch=_whole_number("WORKER_PREFETCH", env.get("WORKER_PREFETCH", str(cls.worker_prefetch)),
                                          WORKER_PREFETCH_RULE),
            publish_timeout=float(env.get("PUBLISH_TIMEOUT", cls.publish_timeout)),
            relay_grace=float(env.get("RELAY_GRACE", cls.relay_grace)),
            public_url=env.get("PUBLIC_URL", cls.public_url),
            forwarded_allow_ips=env.get("FORWARDED_ALLOW_IPS", cls.forwarded_allow_ips),
            event_types_strict=_flag("EVENT_TYPES_STRICT", env.get("EVENT_TYPES_STRICT", "0")),
            event_types_cache=parse_seconds(env.get("EVENT_TYPES_CACHE", "5s")),
            portal_session_ttl=parse_seconds(env.get("PORTAL_SESSION_TTL", "12h")),
            portal_frame_ancestors=env.get("PORTAL_FRAME_ANCESTORS", cls.portal_frame_ancestors),
            portal_brand_name=env.get("PORTAL_BRAND_NAME", cls.portal_brand_name),
            portal_logo_url=env.get("PORTAL_LOGO_URL") or None,
            portal_accent=env.get("PORTAL_ACCENT", cls.portal_accent),
        )
        if isinstance(overrides.get("ladder"), str):
            overrides["ladder"] = Ladder.parse(overrides["ladder"])
        if isinstance(overrides.get("probe_interval"), str):
            overrides["probe_interval"] = ProbeInterval.parse(overrides["probe_interval"])
        return replace(base, **overrides)

    @property
    def topology(self) -> Topology:
        """Queue names and declarations for this prefix and ladder."""
        return Topology(self.queue_prefix, self.ladder)

    def with_secret_key(self, instance_path: str | Path) -> "Settings":
        """Use ``SECRET_KEY`` or one generated once and kept under ``instance/``.

        Kept in a file so every gunicorn worker (and every restart) signs sessions alike.
        """
        if self.secret_key:
            return self
        key = generated_once(Path(instance_path) / "secret_key", lambda: secrets.token_hex(32))
        return replace(self, secret_key=key)
