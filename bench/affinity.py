"""Jobs that go where the cache is: the worker-host policy of jobs/affinity.py, simulated.

Several worker hosts share one job database; each keeps its own repository cache (bounded,
least recently used out first). Without affinity (every deployment before host queues, and a
single host still) every job waits in the one shared queue and a free slot takes the next
fair job whatever its repository, so every host ends up fetching, and indexing, every
repository it is handed. With affinity each host also has its own queue, and a job is put,
when it is deferred, in the queue that `jobs.affinity.place` names (this script imports it:
the table measures the service's own function): the repository's rendezvous owner among the
live hosts, its second home when the owner is busy (as many due jobs waiting in its queue as
it has slots), else the shared queue. A free slot of a host takes, from its own queue and the
shared one, the job the fairness rule of jobs/fairness.py picks (the tenant with the fewest
jobs running, then the tenant whose last start is the oldest, then the oldest job) under the
per-tenant running cap, as `pr_review_fetch_job` does.

The model, deterministic for a seed:
- `--hosts` hosts of `--slots` slots, each with a cache of `--cache-gb`;
- `--repositories` repositories, packed sizes log-normal (median 40 MB, a few above a GB,
  from 1 MB to 6 GB), their searchable text 4x their pack; jobs pick a repository by a Zipf
  law (a few busy repositories, a long tail), and each repository belongs to one of
  `--tenants` tenants (the busiest tenant owns the busiest repository);
- `--jobs` jobs arrive as a Poisson process at a rate that keeps the slots about 75% busy;
- a job on a host whose cache lacks the repository fetches it whole (at 40 MB/s) and, when
  its text is above 32 MiB, that host builds the repository's search index (counted, not
  timed against the slots: builds run in the background at low priority); a cached one
  fetches what the pull request added (0.5% of the pack, at least 1 MB). The review itself
  takes a log-normal time (median 45 s: the model's turns);
- killed: the last host dies when half the jobs have arrived, losing its cache. As in the
  service, its heartbeat stays fresh for the stalled bound (15 s), so jobs deferred meanwhile
  still go to its queue; the next recovery sweep (5 s later) puts its running jobs back and
  moves every job waiting in its queue to the queue `place` names among the live hosts
  (`jobs.affinity.rehome`); the running ones start again from the beginning;
- a job that has waited `SPILL_AFTER_SECONDS` (60 s) since it was deferred may be taken by a
  free slot of any host, as `pr_review_fetch_job` allows (schema migration 8).

Figures per scenario: bytes fetched, whole fetches, index builds, queue wait (p50, p95,
worst), the worst tenant's p95 wait and the other tenants' (fairness), jobs run again after
the kill and jobs moved off the dead host's queue. Median (range) over `--seeds` seeds.

    uv run python -m bench.affinity [--quick] [--seeds 3] [--jobs 2000] [--hosts 4]
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import math
import random
import statistics
from collections import OrderedDict
from dataclasses import dataclass, field

from pr_review_api.jobs import affinity
from pr_review_api.jobs.affinity import BACKLOG_PER_SLOT, HOMES, SPILL_AFTER_SECONDS, HostLoad

MB = 1e6
FETCH_BYTES_PER_SECOND = 40 * MB
INDEX_MIN_TEXT_BYTES = 32 * 1024**2  # git/search_index/schedule.py INDEX_MIN_BYTES
TEXT_PER_PACK = 4.0
INCREMENT_SHARE = 0.005
INCREMENT_MIN_BYTES = 1 * MB
REVIEW_MEDIAN_SECONDS = 45.0
UTILISATION = 0.75
STALLED_AFTER_SECONDS = 15.0  # jobs/queue.py QueueTuning: a host without heartbeat is gone
RECOVERY_SWEEP_SECONDS = 5.0  # jobs/queue.py QueueTuning: how often recovery runs


@dataclass(frozen=True)
class Repository:
    name: str
    pack_bytes: float
    tenant: str

    @property
    def indexed(self) -> bool:
        return self.pack_bytes * TEXT_PER_PACK >= INDEX_MIN_TEXT_BYTES


@dataclass
class Job:
    number: int
    repository: Repository
    arrival: float
    review_seconds: float
    queue: str = affinity.SHARED_QUEUE
    host: int | None = None
    waited: bool = False  # its first start is counted; a retry's is not


@dataclass
class Host:
    number: int
    slots: int
    cache_bytes: float
    alive: bool = True  # runs jobs
    beating: bool = True  # its heartbeat is fresh: jobs are still deferred to it
    running: set[int] = field(default_factory=set)
    cache: OrderedDict[str, float] = field(default_factory=OrderedDict)

    @property
    def name(self) -> str:
        return f"host-{self.number}"

    def fetch(self, repository: Repository) -> tuple[float, bool]:
        """Bytes this host fetches for a job of `repository`, and whether it was whole."""
        if repository.name in self.cache:
            self.cache.move_to_end(repository.name)
            return max(INCREMENT_MIN_BYTES, INCREMENT_SHARE * repository.pack_bytes), False
        self.cache[repository.name] = repository.pack_bytes
        while sum(self.cache.values()) > self.cache_bytes and len(self.cache) > 1:
            self.cache.popitem(last=False)
        return repository.pack_bytes, True


@dataclass(frozen=True)
class Scenario:
    name: str
    affinity: bool
    kill: bool = False
    homes: int = HOMES
    backlog_per_slot: float = BACKLOG_PER_SLOT
    spill_after: float = SPILL_AFTER_SECONDS  # None-like: math.inf, never taken elsewhere


@dataclass
class Outcome:
    fetched_bytes: float = 0.0
    whole_fetches: int = 0
    index_builds: int = 0
    waits: list[float] = field(default_factory=list)
    tenant_waits: dict[str, list[float]] = field(default_factory=dict)
    retried: int = 0
    moved: int = 0
    placed: dict[str, int] = field(default_factory=dict)  # owner / second home / shared


def make_workload(args: argparse.Namespace, seed: int) -> tuple[list[Repository], list[Job]]:
    rng = random.Random(seed)
    tenants = [f"tenant-{n:02d}" for n in range(args.tenants)]
    repositories = []
    for n in range(args.repositories):
        size = min(6000 * MB, max(1 * MB, rng.lognormvariate(math.log(40 * MB), 1.5)))
        # The busiest repository (a team's monorepo, a fifth of the jobs) is the first
        # tenant's alone; the others are spread over the other tenants.
        tenant = tenants[0] if n == 0 else rng.choice(tenants[1:])
        repositories.append(Repository(f"repo-{n:03d}", size, tenant))
    weights = [1 / (rank + 1) ** 1.1 for rank in range(len(repositories))]
    mean_fetch = sum(w * r.pack_bytes for w, r in zip(weights, repositories, strict=True)) / sum(
        weights
    )
    mean_service = REVIEW_MEDIAN_SECONDS * math.exp(0.6**2 / 2) + mean_fetch / (
        FETCH_BYTES_PER_SECOND * 4
    )
    rate = UTILISATION * args.hosts * args.slots / mean_service
    jobs, clock = [], 0.0
    for number in range(args.jobs):
        clock += rng.expovariate(rate)
        repository = rng.choices(repositories, weights)[0]
        review = rng.lognormvariate(math.log(REVIEW_MEDIAN_SECONDS), 0.6)
        jobs.append(Job(number, repository, clock, review))
    return repositories, jobs


def simulate(args: argparse.Namespace, scenario: Scenario, jobs: list[Job]) -> Outcome:
    """Run the jobs through the scenario's hosts; what it cost."""
    return Simulation(args, scenario, jobs).run()


class Simulation:
    """The hosts, their queues and the events of one scenario."""

    def __init__(self, args: argparse.Namespace, scenario: Scenario, jobs: list[Job]) -> None:
        self.scenario = scenario
        self.jobs = jobs
        self.tenant_cap: int = args.tenant_cap
        self.hosts = [Host(n, args.slots, args.cache_gb * 1e9) for n in range(1, args.hosts + 1)]
        self.outcome = Outcome()
        self.events: list[tuple[float, int, str, int]] = []  # (time, order, kind, key)
        self.order = itertools.count()
        self.waiting: dict[int, Job] = {}  # by job number: the arrival order is the id order
        self.running_by_tenant: dict[str, int] = {}
        self.last_start: dict[str, float] = {}
        self.attempt: dict[int, int] = {}  # a retried job's older completions are void
        self.stranded: list[int] = []  # running on a dead host until the recovery sweep
        for job in jobs:
            job.host, job.waited, job.queue = None, False, affinity.SHARED_QUEUE
            self.push(job.arrival, "arrive", job.number)
            if scenario.affinity and math.isfinite(scenario.spill_after):
                # Any host may take it now, if it still waits in a host's queue.
                self.push(job.arrival + scenario.spill_after, "spill", job.number)
        if scenario.kill:
            killed_at = jobs[len(jobs) // 2].arrival
            self.push(killed_at, "kill", len(self.hosts) - 1)
            self.push(killed_at + STALLED_AFTER_SECONDS, "stale", len(self.hosts) - 1)
            self.push(killed_at + STALLED_AFTER_SECONDS + RECOVERY_SWEEP_SECONDS, "sweep", 0)

    def push(self, when: float, kind: str, key: int) -> None:
        heapq.heappush(self.events, (when, next(self.order), kind, key))

    def run(self) -> Outcome:
        while self.events:
            now, _, kind, key = heapq.heappop(self.events)
            if kind == "arrive":
                self.defer(self.jobs[key])
            elif kind == "done":
                self.finish(*divmod(key, 1 << 20))
            elif kind == "kill":
                self.kill(self.hosts[key])
            elif kind == "stale":
                self.hosts[key].beating = False
            elif kind == "sweep":
                self.sweep()
            self.dispatch(now)
        return self.outcome

    def loads(self) -> list[HostLoad]:
        """What `jobs.affinity.live_hosts` reads: hosts with a fresh heartbeat, their slots
        and the jobs waiting in their own queues."""
        waiting: dict[str, int] = {}
        for job in self.waiting.values():
            waiting[job.queue] = waiting.get(job.queue, 0) + 1
        return [
            HostLoad(host.name, host.slots, waiting.get(affinity.host_queue(host.name), 0))
            for host in self.hosts
            if host.beating
        ]

    def place(self, job: Job, hosts: list[HostLoad]) -> None:
        """The job's queue, as the service defers it (none but the shared one without
        affinity: today's code, and a single host's)."""
        if self.scenario.affinity:
            job.queue = affinity.place(
                job.repository.name,
                hosts,
                homes=self.scenario.homes,
                backlog_per_slot=self.scenario.backlog_per_slot,
            )
        ranks = affinity.ranked(job.repository.name, [load.host for load in hosts])
        kind = "shared"
        if job.queue in (affinity.host_queue(host) for host in ranks[:1]):
            kind = "owner"
        elif job.queue != affinity.SHARED_QUEUE:
            kind = "second home"
        self.outcome.placed[kind] = self.outcome.placed.get(kind, 0) + 1

    def defer(self, job: Job) -> None:
        self.place(job, self.loads())
        self.waiting[job.number] = job

    def finish(self, number: int, attempt: int) -> None:
        job = self.jobs[number]
        if self.attempt.get(number) != attempt or job.host is None:
            return  # the run of a killed host: the job ran again elsewhere
        self.hosts[job.host - 1].running.discard(number)
        self.running_by_tenant[job.repository.tenant] -= 1

    def kill(self, dead: Host) -> None:
        """The host stops; its running jobs stay `doing` until the recovery sweep."""
        dead.alive = False
        dead.cache.clear()
        for number in sorted(dead.running):
            self.attempt[number] = self.attempt.get(number, 0) + 1  # its run ends void
            self.stranded.append(number)
        dead.running.clear()

    def sweep(self) -> None:
        """A live worker's recovery: the stalled jobs back in their queue, then every job
        waiting on a dead host's queue placed again among the live hosts, oldest first."""
        for number in self.stranded:
            job = self.jobs[number]
            self.running_by_tenant[job.repository.tenant] -= 1
            job.host = None
            self.waiting[number] = job
            self.outcome.retried += 1
        self.stranded.clear()
        live = {affinity.host_queue(host.name) for host in self.hosts if host.beating}
        hosts = self.loads()
        for number in sorted(self.waiting):
            job = self.waiting[number]
            if job.queue != affinity.SHARED_QUEUE and job.queue not in live:
                self.place(job, hosts)
                self.outcome.moved += 1

    def dispatch(self, now: float) -> None:
        """Fill every free slot of every live host with the job the fairness rule picks."""
        progress = True
        while progress and self.waiting:
            progress = False
            for host in self.hosts:
                if not host.alive or len(host.running) >= host.slots:
                    continue
                best = self.pick(host, now)
                if best is not None:
                    seconds = self.start(best, host, now)
                    key = best.number * (1 << 20) + self.attempt.setdefault(best.number, 0)
                    self.push(now + seconds, "done", key)
                    progress = True

    def pick(self, host: Host, now: float) -> Job | None:
        """`pr_review_fetch_job` for a worker of `host`: its queue, the shared one, and
        another host's once the job has waited `spill_after` seconds there."""
        queues = (affinity.SHARED_QUEUE, affinity.host_queue(host.name))
        best, best_rank = None, None
        for job in self.waiting.values():
            # A job's wait counts from when it was deferred (rehoming does not restart it).
            if job.queue not in queues and now - job.arrival < self.scenario.spill_after:
                continue
            tenant = job.repository.tenant
            running = self.running_by_tenant.get(tenant, 0)
            if running >= self.tenant_cap:
                continue
            rank = (running, self.last_start.get(tenant, -1.0), job.number)
            if best_rank is None or rank < best_rank:
                best, best_rank = job, rank
        return best

    def start(self, job: Job, host: Host, now: float) -> float:
        """Start `job` on `host`; the seconds it will take."""
        self.waiting.pop(job.number)
        tenant = job.repository.tenant
        self.running_by_tenant[tenant] = self.running_by_tenant.get(tenant, 0) + 1
        self.last_start[tenant] = now
        host.running.add(job.number)
        if not job.waited:
            job.waited = True
            self.outcome.waits.append(now - job.arrival)
            self.outcome.tenant_waits.setdefault(tenant, []).append(now - job.arrival)
        job.host = host.number
        fetched, whole = host.fetch(job.repository)
        self.outcome.fetched_bytes += fetched
        if whole:
            self.outcome.whole_fetches += 1
            self.outcome.index_builds += job.repository.indexed
        return job.review_seconds + fetched / FETCH_BYTES_PER_SECOND


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)] if ordered else 0.0


def main() -> None:
    options = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    options.add_argument("--hosts", type=int, default=4)
    options.add_argument("--slots", type=int, default=4, help="concurrent reviews a host runs")
    options.add_argument("--repositories", type=int, default=100)
    options.add_argument("--tenants", type=int, default=20)
    options.add_argument("--jobs", type=int, default=2000)
    options.add_argument(
        "--cache-gb", type=float, default=20 * 1.024**3, help="each host's cache (the default's)"
    )
    options.add_argument("--tenant-cap", type=int, default=4, help="running jobs a tenant may have")
    options.add_argument("--seeds", "--runs", type=int, default=3, help="seeds (the median)")
    options.add_argument("--quick", action="store_true", help="200 jobs, 1 seed")
    args = options.parse_args()
    if args.quick:
        args.jobs, args.seeds = 200, 1
    backlog = affinity.BACKLOG_PER_SLOT
    scenarios = []
    for kill in (False, True):
        killed = ", a host killed half way" if kill else ""
        scenarios += [
            Scenario(f"no affinity (today){killed}", affinity=False, kill=kill),
            Scenario(f"affinity (jobs/affinity.py){killed}", affinity=True, kill=kill),
        ]
    # Other constants for the same function, to show what the service's cost and buy.
    spill = SPILL_AFTER_SECONDS
    scenarios += [
        Scenario("variant: never taken from another host", True, spill_after=math.inf),
        Scenario(f"variant: taken elsewhere after {spill / 2:g} s", True, spill_after=spill / 2),
        Scenario("variant: owner only, then shared", affinity=True, homes=1),
        Scenario(f"variant: busy at {2 * backlog:g} a slot", True, backlog_per_slot=2 * backlog),
        Scenario(f"variant: busy at {backlog / 2:g} a slot", True, backlog_per_slot=backlog / 2),
    ]
    rows: dict[str, list[Outcome]] = {scenario.name: [] for scenario in scenarios}
    for seed in range(1, args.seeds + 1):
        repositories, jobs = make_workload(args, seed)
        if seed == 1:
            sizes = sorted(r.pack_bytes for r in repositories)
            print(
                f"# {len(repositories)} repositories: packs {sizes[0] / MB:,.0f} MB to "
                f"{sizes[-1] / MB:,.0f} MB, median {statistics.median(sizes) / MB:,.0f} MB, "
                f"total {sum(sizes) / 1e9:,.1f} GB; {sum(r.indexed for r in repositories)} "
                f"indexed; {args.hosts} hosts x {args.slots} slots, {args.cache_gb:g} GB "
                "cache each"
            )
        for scenario in scenarios:
            rows[scenario.name].append(simulate(args, scenario, jobs))
    _print(rows, args)


def _spread(values: list[float], unit: str = "", digits: int = 0) -> str:
    middle = statistics.median(values)
    text = f"{middle:,.{digits}f}{unit}"
    if len(values) > 1:
        text += f" ({min(values):,.{digits}f}-{max(values):,.{digits}f})"
    return text


def _others(outcome: Outcome) -> list[float]:
    """The waits of every tenant but the busiest (which its running cap holds back)."""
    busiest = max(outcome.tenant_waits, key=lambda tenant: len(outcome.tenant_waits[tenant]))
    return [w for t, waits in outcome.tenant_waits.items() if t != busiest for w in waits]


def _placed(outcomes: list[Outcome]) -> str:
    """Where jobs were deferred (and moved to), in percent, the median over the seeds."""
    shares = []
    for kind in ("owner", "second home", "shared"):
        counts = [o.placed.get(kind, 0) / max(1, sum(o.placed.values())) for o in outcomes]
        shares.append(f"{100 * statistics.median(counts):.0f}")
    return " / ".join(shares)


def _print(rows: dict[str, list[Outcome]], args: argparse.Namespace) -> None:
    header = (
        "scenario",
        "fetched (GB)",
        "whole fetches",
        "index builds",
        "wait p50 (s)",
        "wait p95 (s)",
        "worst wait (s)",
        "worst tenant's p95 (s)",
        "other tenants' p95 (s)",
        "retried",
        "moved",
        "owner / 2nd / shared (%)",
    )
    table = [header]
    for name, outcomes in rows.items():
        table.append(
            (
                name,
                _spread([o.fetched_bytes / 1e9 for o in outcomes], digits=1),
                _spread([float(o.whole_fetches) for o in outcomes]),
                _spread([float(o.index_builds) for o in outcomes]),
                _spread([statistics.median(o.waits) for o in outcomes], digits=1),
                _spread([p95(o.waits) for o in outcomes]),
                _spread([max(o.waits) for o in outcomes]),
                _spread([max(p95(w) for w in o.tenant_waits.values()) for o in outcomes]),
                _spread([p95(_others(o)) for o in outcomes]),
                _spread([float(o.retried) for o in outcomes]),
                _spread([float(o.moved) for o in outcomes]),
                _placed(outcomes),
            )
        )
    print(f"\n## {args.jobs:,} jobs, median (range) over {args.seeds} seed(s)\n")
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for number, row in enumerate(table):
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
        if number == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")


if __name__ == "__main__":
    main()
