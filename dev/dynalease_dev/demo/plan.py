"""What one demo run is asked to do (:class:`DemoOptions`) and how it is shaped (:class:`Plan`)."""

from __future__ import annotations

from dataclasses import dataclass, field

MIN_DURATION_S = 10.0


class DemoError(Exception):
    """The demo could not run; ``usage`` when an option was at fault (not the environment)."""

    def __init__(self, message: str, *, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


@dataclass(frozen=True)
class DemoOptions:
    """The options of ``dynalease-dev demo``; ``None`` means the default."""

    endpoint: str | None = None
    region: str | None = None
    profile: str | None = None
    table: str | None = None
    duration: float | None = None
    quick: bool = False
    workers: int | None = None
    keys: int = 3
    plain: bool = False
    keep_tables: bool = False
    paused_holder: bool = False


@dataclass(frozen=True)
class Plan:
    """How one demo run is shaped."""

    duration_s: float
    workers: int
    customers: list[str]
    lease_s: float
    hold_max_s: float
    tables: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_options(cls, options: DemoOptions, suffix: str) -> Plan:
        quick = options.quick
        duration = options.duration or (15.0 if quick else 100.0)
        if duration < MIN_DURATION_S:
            raise DemoError(
                f"--duration must be at least {MIN_DURATION_S:g} s so a crash and its "
                f"takeover fit in the run, got {duration:g}",
                usage=True,
            )
        locks = options.table or f"dynalease-demo-locks-{suffix}"
        return cls(
            duration_s=duration,
            workers=options.workers or (3 if quick else 4),
            # The sample events name c-1001 and c-2002: the Lambda handlers and the
            # workers contend for the same customers.
            customers=[f"c-{n}00{n}" for n in range(1, options.keys + 1)],
            # A short lease keeps the crash recovery visible within the run.
            lease_s=3.0 if duration < 40 else 5.0,
            hold_max_s=1.2 if duration < 40 else 2.5,
            tables={"locks": locks, "results": f"{locks}-results", "history": f"{locks}-history"},
        )
