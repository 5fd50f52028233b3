"""A naive reference for the engines: the chain of docs/model.md §1–2 stepped in plain Python.

Nothing here imports the package: the random numbers are a plain-Python xoshiro256**
(Blackman and Vigna; seeded through SplitMix64, as ``engines/rng.py`` says it is), and each
chain is written from the model's definition, with integers and exactly rounded
probabilities.  The only thing taken from the kernels is the *order* in which a step
consumes random numbers, which a reference must share to be compared state for state:

- every step starts with one 53-bit uniform ``u``; it is an arrival when ``u < λ/(1+λ)``;
- ``profile``: the same ``u`` gives the level (docs/model.md §2): an arrival joins length
  ``ℓ = #{i ≥ 1 : U < P_i}`` with ``U = u/p``, a departure hits length
  ``ℓ = #{i ≥ 1 : c_i > n(u − p)/(1 − p)}``;
- ``queues``: an arrival then draws its ``d`` servers with :meth:`Xoshiro.below` (with
  replacement: ``d`` independent draws, the first minimal entry joins; without: Floyd's
  sample of ``d`` distinct servers, the minimal entries' tie broken uniformly by reservoir
  sampling, one more draw per tie); a departure draws its server with ``below(n)``;
- ``buckets``: an arrival's level comes from ``u`` as in ``profile``, then one ``below`` picks
  the joining queue uniformly in its block of the sorted arrangement; a departure draws a
  position with ``below(n)``;
- the other dispatch rules (``random``, ``jsq``, ``jiq``; profile and buckets): the same
  draws with the rule's ``P_i`` (:meth:`_Naive.P`); JIQ's is ``1{c_1 = n}·c_i/n``, so an
  arrival joins an idle queue while there is one;
- ``coupling`` (the sorted coupling of §2, several copies on the same numbers): a second
  uniform ``u' = 1 − v`` in ``(0, 1]`` gives the arrival's position (the largest of ``d``
  uniform positions) or the departure's position ``⌈n u'⌉``;
- ``fluct`` (the chain of paper 002's fluctuations, continuous time without
  uniformization): a holding time ``−log(1 − u₁)/(nλ + c_1)``, then ``u₂``: an arrival when
  ``u₂ (nλ + c_1) < nλ``; an arrival joins length ``#{i ≥ 1 : P_i > 1 − u₃}``, a departure
  leaves the busy server at position ``K = 1 + ⌊u₃ c_1⌋``;
- in continuous time every step ends with one more uniform ``v``, the holding time
  ``−log(1 − v)/(n(1+λ))``, and one such draw precedes the first step (the first event
  time); in discrete time the ``k``-th step happens at time ``k``;
- ``events`` (general service, server classes, every rule: :class:`NaiveEvents`), ``phase``
  (phase-type service on the counts ``N[ℓ][φ]``, every rule: :class:`NaivePhase`), ``fifo``
  (:class:`NaiveFifo`) and the perfect sampler's past and copies (:class:`NaivePast`,
  :func:`apply_code`): their classes say their draws.

Not a chain and so without a reference here: ``engines/measure.py`` (the per-event
bookkeeping the kernels share: lazy integrals, the good-set clock, records; compared
through the integrals of every engine above), ``layout.py``, ``tables.py`` and ``rng.py``
(data and the generator, checked value for value) and ``sde.py`` (Euler–Maruyama paths
of a diffusion approximation, not the chain).

Time integrals (``∫ c_i dt``, ``∫ P_i dt`` and the time at each maximum) are accumulated
step by step here, where the kernels integrate lazily level by level.

The server-classes counts engine (``engines/classes.py``, docs/model.md §15) has
:class:`NaiveClasses`, whose docstring says its draws; its time is the event count and it
sums the counts each event leaves, as that kernel does.
"""

from __future__ import annotations

import math
from functools import lru_cache

M64 = (1 << 64) - 1

__all__ = [
    "Xoshiro",
    "splitmix64_stream",
    "NaiveProfile",
    "NaiveQueues",
    "NaiveBuckets",
    "NAIVE",
    "NaiveCoupling",
    "NaiveFluct",
    "RULES",
    "service_params",
    "NaiveEvents",
    "NaivePhase",
    "NaiveFifo",
    "NaivePast",
    "apply_code",
    "NaiveClasses",
]


# --------------------------------------------------------------------------- random numbers
def splitmix64_stream(seed: int, count: int) -> list[int]:
    """The first ``count`` outputs of SplitMix64 seeded with ``seed`` (Steele, Lea, Flood 2014)."""
    x = seed & M64
    out = []
    for _ in range(count):
        x = (x + 0x9E3779B97F4A7C15) & M64
        z = x
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        out.append(z ^ (z >> 31))
    return out


def _rotl(x: int, k: int) -> int:
    return ((x << k) | (x >> (64 - k))) & M64


class Xoshiro:
    """xoshiro256** on four Python integers (the public-domain ``xoshiro256starstar.c``)."""

    def __init__(self, words):
        self.s = [int(w) & M64 for w in words]

    @classmethod
    def from_seed(cls, seed: int) -> Xoshiro:
        """Four words of SplitMix64 from ``seed``; the all-zero state (never reached in
        practice) is replaced by ``(1, 0, 0, 0)``."""
        words = splitmix64_stream(seed, 4)
        if not any(words):
            words[0] = 1
        return cls(words)

    def next_u64(self) -> int:
        s = self.s
        result = (_rotl((s[1] * 5) & M64, 7) * 9) & M64
        t = (s[1] << 17) & M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = _rotl(s[3], 45)
        return result

    def double(self) -> float:
        """Uniform on ``{0, 2^-53, …, 1 − 2^-53}``: the top 53 bits."""
        return (self.next_u64() >> 11) / 9007199254740992.0

    def below(self, n: int) -> int:
        """Exactly uniform on ``0..n-1`` for ``1 <= n < 2^32`` (Lemire 2019: the high word of
        ``x·n`` for a 32-bit ``x``, rejecting the ``2^32 mod n`` low words that bias it)."""
        assert 1 <= n < 1 << 32
        while True:
            m = (self.next_u64() >> 32) * n
            if (m & 0xFFFFFFFF) >= (1 << 32) % n:
                return m >> 32


# --------------------------------------------------------------------------- the chains
class _Naive:
    """The common part: parameters, time, counts ``c[0] = c_1, c[1] = c_2, …`` (trailing
    zeros trimmed) and the time integrals."""

    def __init__(self, n, d, lam, replace, counts, seed, continuous, policy="jsq-d"):
        if policy not in RULES:
            raise ValueError(f"policy must be one of {', '.join(RULES)}; got {policy!r}")
        self.policy = policy
        self.n, self.d, self.lam, self.replace = int(n), int(d), float(lam), bool(replace)
        self.p = self.lam / (1.0 + self.lam)  # probability that a step is an arrival (§1)
        self.rate = self.n * (1.0 + self.lam)  # the uniformization rate n(1+λ) (§1)
        self.rng = Xoshiro.from_seed(seed)
        self.continuous = bool(continuous)
        self.c = [int(v) for v in counts if v > 0]
        self.now = 0.0
        self.steps = 0
        self.area_c: list[float] = []
        self.area_P: list[float] = []
        self.maxtime: list[float] = []
        self.good: tuple | None = None
        self.good_time = 0.0
        self.t_next = self._holding() if self.continuous else 1.0

    def watch_good_set(self, k: int, lo, hi) -> None:
        """Integrate the time spent in the good set ``N^ε`` of docs/model.md §5 as the code
        states it: (a) ``c_{k+1} = 0`` and (b) ``lo_j <= n − c_j <= hi_j`` for ``j = 1..k``."""
        self.good = (int(k), [float(x) for x in lo], [float(x) for x in hi])

    def in_good_set(self) -> bool:
        k, lo, hi = self.good
        c = self.c + [0] * (k + 1)
        return c[k] == 0 and all(lo[j - 1] <= self.n - c[j - 1] <= hi[j - 1] for j in range(1, k + 1))

    # §1: discrete steps at 1, 2, …; continuous: exponential holding times of rate n(1+λ)
    def _holding(self) -> float:
        return -math.log(1.0 - self.rng.double()) / self.rate

    def P(self, c: int) -> float:
        """The rule's ``P`` for a level with ``c`` queues of length ``>= i`` (docs/model.md
        §2, "Other dispatch rules"), correctly rounded from exact integers: JSQ(d)'s ``P_i``;
        ``c/n`` for random routing (one uniform queue has length ``>= i``) and for JIQ (whose
        ``P_i`` is this times ``1{c_1 = n}``: :meth:`P_levels`); ``1{c = n}`` for JSQ (the
        shortest of all ``n`` has length ``>= i`` only if every queue has)."""
        if self.policy == "jsq-d":
            return _p_exact(c, self.n, self.d, self.replace)
        if self.policy == "jsq":
            return 1.0 if c == self.n else 0.0
        return c / self.n  # int / int: correctly rounded

    def P_levels(self) -> list[float]:
        """``P_i`` of the rule at the current state, ``i = 1..top`` (JIQ: ``1{c_1 = n}·c_i/n``)."""
        if self.policy == "jiq" and (not self.c or self.c[0] < self.n):
            return [0.0] * len(self.c)
        return [self.P(ci) for ci in self.c]

    def _integrate(self, t: float) -> None:
        dt = t - self.now
        L = len(self.c)
        for acc in (self.area_c, self.area_P):
            acc.extend([0.0] * (L - len(acc)))
        for i, (ci, pi) in enumerate(zip(self.c, self.P_levels())):
            self.area_c[i] += ci * dt
            self.area_P[i] += pi * dt
        self.maxtime.extend([0.0] * (L + 1 - len(self.maxtime)))
        self.maxtime[L] += dt
        if self.good is not None and self.in_good_set():
            self.good_time += dt
        self.now = t

    def _level_up(self, ell: int) -> None:
        """A customer joins a queue of length ``ell``: ``c_{ell+1} += 1``."""
        if ell == len(self.c):
            self.c.append(0)
        self.c[ell] += 1

    def _level_down(self, ell: int) -> None:
        """A customer leaves a queue of length ``ell >= 1``: ``c_ell -= 1``."""
        self.c[ell - 1] -= 1
        if self.c[-1] == 0:
            self.c.pop()

    def step(self) -> None:
        """One event of the uniformized chain, at time ``t_next``."""
        self._integrate(self.t_next)
        u = self.rng.double()
        if u < self.p:
            self._arrival(u)
        else:
            self._departure(u)
        self.steps += 1
        self.t_next = self.now + (self._holding() if self.continuous else 1.0)

    def run(self, steps: int) -> None:
        for _ in range(steps):
            self.step()

    def joined_length(self, u: float) -> int:
        """§2: ``ℓ = #{i ≥ 1 : U < P_i}`` with ``U = u/p`` uniform on ``(0, 1)``, for the
        rule's ``P_i`` (JIQ: 0 while a queue is idle, then the length of a uniform queue)."""
        U = u / self.p
        return sum(1 for pi in self.P_levels() if pi > U)


@lru_cache(maxsize=1 << 16)
def _p_exact(c: int, n: int, d: int, replace: bool) -> float:
    if replace:
        return c**d / n**d  # int / int: correctly rounded
    if c < d:
        return 0.0
    return math.comb(c, d) / math.comb(n, d)


class NaiveProfile(_Naive):
    """The counts chain (docs/model.md §2): the state is ``c`` alone."""

    def _arrival(self, u):
        self._level_up(self.joined_length(u))

    def _departure(self, u):
        y = self.n * (u - self.p) / (1.0 - self.p)  # uniform on (0, n): a uniform queue
        ell = sum(1 for ci in self.c if ci > y)
        if ell:
            self._level_down(ell)


class NaiveQueues(_Naive):
    """The per-queue chain exactly as §1 defines it: ``x[j]`` is the length of queue ``j``;
    the start gives the ``c_i`` longest queues length ``>= i`` (queues ``0..c_1−1`` busy)."""

    def __init__(self, n, d, lam, replace, counts, seed, continuous, policy="jsq-d"):
        super().__init__(n, d, lam, replace, counts, seed, continuous, policy)
        if policy != "jsq-d":
            raise ValueError("the per-queue chain samples d queues: policy 'jsq-d' only")
        self.x = [sum(1 for ci in self.c if ci > j) for j in range(self.n)]

    def _arrival(self, u):
        below, x = self.rng.below, self.x
        if self.replace:
            # a uniform d-tuple from {0..n-1}^d; join its first minimal entry
            tup = [below(self.n) for _ in range(self.d)]
            q = min(tup, key=lambda k: x[k])  # min returns the first minimal entry
        else:
            # d distinct servers (Floyd's algorithm); the shortest, ties broken uniformly
            chosen: set[int] = set()
            q, best, ties = -1, None, 0
            for jj in range(self.n - self.d, self.n):
                t = below(jj + 1)
                if t in chosen:
                    t = jj
                chosen.add(t)
                if best is None or x[t] < best:
                    q, best, ties = t, x[t], 1
                elif x[t] == best:
                    ties += 1
                    if below(ties) == 0:  # the new tie replaces the choice with probability 1/ties
                        q = t
        self._level_up(x[q])
        x[q] += 1

    def _departure(self, u):
        K = self.rng.below(self.n)
        if self.x[K] > 0:
            self._level_down(self.x[K])
            self.x[K] -= 1


class NaiveBuckets(_Naive):
    """The sorted arrangement of §2: ``perm[p]`` is the queue at position ``p``, longest
    first, so the queues of length exactly ``ℓ`` sit at positions ``[c_{ℓ+1}, c_ℓ)``
    (``c_0 = n``); the start puts queue ``p`` at position ``p``."""

    def __init__(self, n, d, lam, replace, counts, seed, continuous, policy="jsq-d"):
        super().__init__(n, d, lam, replace, counts, seed, continuous, policy)
        self.perm = list(range(self.n))

    def _count(self, i: int) -> int:
        """``c_i`` with ``c_0 = n`` and ``c_i = 0`` above the top."""
        if i == 0:
            return self.n
        return self.c[i - 1] if i <= len(self.c) else 0

    def _arrival(self, u):
        ell = self.joined_length(u)
        first, end = self._count(ell + 1), self._count(ell)  # the block of length-ℓ queues
        p = first + self.rng.below(end - first)  # a uniform queue of length ℓ joins
        perm = self.perm
        perm[p], perm[first] = perm[first], perm[p]  # it moves to the block's edge …
        self._level_up(ell)  # … which becomes the last position of length ℓ + 1

    def _departure(self, u):
        K = self.rng.below(self.n)  # a uniform position
        ell = sum(1 for ci in self.c if ci > K)  # its length, #{i : c_i > K}
        if ell:
            last = self._count(ell) - 1
            perm = self.perm
            perm[K], perm[last] = perm[last], perm[K]
            self._level_down(ell)

    def lengths(self) -> list[int]:
        """Queue lengths by queue identity."""
        out = [0] * self.n
        for p, q in enumerate(self.perm):
            out[q] = sum(1 for ci in self.c if ci > p)
        return out


RULES = ("jsq-d", "random", "jsq", "jiq")
NAIVE = {"profile": NaiveProfile, "queues": NaiveQueues, "buckets": NaiveBuckets}


# --------------------------------------------------------------------------- the sorted coupling
class NaiveCoupling:
    """Copies of the profile chain under the sorted coupling (docs/model.md §2): queues are
    named by their position ``1..n`` in the sorted order, longest first, so the queue at
    position ``p`` of a copy has length ``#{i ≥ 1 : c_i ≥ p}``; every copy takes the same
    step (an arrival at the same position, or a departure from the same position).
    ``dist[m]`` is ``Σ_i |c_i − c_i(copy 0)|``, ``tau[m]`` the first step at which copy ``m``
    equalled copy 0 (``0`` when it starts equal, ``-1`` before)."""

    def __init__(self, n, d, lam, replace, starts, words):
        self.n, self.d, self.replace = int(n), int(d), bool(replace)
        self.p = float(lam) / (1.0 + float(lam))
        self.rng = Xoshiro(words)
        self.c = [[int(v) for v in cm if v > 0] for cm in starts]
        self.step_no = 0
        self.dist = [self._l1(m) for m in range(len(self.c))]
        self.tau = [0 if x == 0 else -1 for x in self.dist]

    def _l1(self, m: int) -> int:
        a, b = self.c[m], self.c[0]
        L = max(len(a), len(b))
        return sum(abs((a[i] if i < len(a) else 0) - (b[i] if i < len(b) else 0)) for i in range(L))

    def arrival_position(self, u: float) -> int:
        """The largest of ``d`` uniform positions: the least ``m`` with ``P(max ≤ m) ≥ u``,
        ``P(max ≤ m) = (m/n)^d`` with replacement, ``C(m, d)/C(n, d)`` without (exact
        integers against the dyadic ``u``)."""
        from fractions import Fraction

        n, d = self.n, self.d
        target = Fraction(u)
        if self.replace:
            ok = lambda m: m**d >= target * n**d  # noqa: E731
            lo = 1
        else:
            total = math.comb(n, d)
            ok = lambda m: math.comb(m, d) >= target * total  # noqa: E731
            lo = d
        hi = n  # ok(n) holds; bisection for the least m with ok(m)
        while lo < hi:
            mid = (lo + hi) // 2
            if ok(mid):
                hi = mid
            else:
                lo = mid + 1
        return lo

    def step(self) -> None:
        arrival = self.rng.double() < self.p
        u = 1.0 - self.rng.double()  # in (0, 1]
        if arrival:
            pos, delta = self.arrival_position(u), 1
        else:
            pos, delta = max(1, min(self.n, math.ceil(self.n * u))), -1
        for cm in self.c:
            ell = sum(1 for ci in cm if ci >= pos)  # the length of the queue at position pos
            if delta > 0:
                if ell == len(cm):
                    cm.append(0)
                cm[ell] += 1  # c_{ℓ+1} += 1
            elif ell > 0:
                cm[ell - 1] -= 1  # c_ℓ −= 1
                if cm[-1] == 0:
                    cm.pop()
        self.step_no += 1
        for m in range(1, len(self.c)):
            self.dist[m] = self._l1(m)
            if self.tau[m] < 0 and self.dist[m] == 0:
                self.tau[m] = self.step_no


# --------------------------------------------------------------------------- paper 002's chain
class NaiveFluct:
    """The counts chain in continuous time as a jump chain (docs/model.md §1–2): from ``c``
    the next event comes after an exponential time of rate ``nλ + c_1`` (arrivals at rate
    ``nλ``, each of the ``c_1`` busy servers completes at rate 1) and is an arrival with
    probability ``nλ/(nλ + c_1)``; an arrival joins a queue of length ``ℓ`` with
    ``P(ℓ ≥ i) = P_i``, a departure leaves a uniformly chosen busy server, the one at
    position ``K`` of the queues sorted longest first, whose length is ``#{i : c_i ≥ K}``."""

    def __init__(self, n, d, lam, replace, counts, words):
        self.n, self.d, self.replace = int(n), int(d), bool(replace)
        self.arr_rate = self.n * float(lam)
        self.rng = Xoshiro(words)
        self.c = [int(v) for v in counts if v > 0]
        self.t = 0.0

    def step(self) -> None:
        from fractions import Fraction

        c1 = self.c[0] if self.c else 0
        rate = self.arr_rate + c1
        self.t += -math.log(1.0 - self.rng.double()) / rate
        if self.rng.double() * rate < self.arr_rate:
            V = Fraction(1.0 - self.rng.double())  # uniform on (0, 1]
            n, d = self.n, self.d
            if self.replace:
                ell = sum(1 for ci in self.c if ci**d > V * n**d)  # P_i = (c_i/n)^d > V
            else:
                total = math.comb(n, d)
                ell = sum(1 for ci in self.c if math.comb(ci, d) > V * total)
            if ell == len(self.c):
                self.c.append(0)
            self.c[ell] += 1
        else:
            K = min(1 + int(self.rng.double() * c1), c1)
            ell = sum(1 for ci in self.c if ci >= K)
            self.c[ell - 1] -= 1
            if self.c[-1] == 0:
                self.c.pop()


# --------------------------------------------------------------------------- the event engine
def service_params(law: str) -> tuple[str, list[float]]:
    """The parameters of a mean-1 service law from its definition (docs/model.md §14):
    ``erlang:K`` (``K`` phases of rate ``K``); ``hyperexp:C`` (balanced means: phase 1 with
    probability ``p = (1 + √((C−1)/(C+1)))/2`` and rate ``2p``, phase 2 with rate
    ``2(1−p)``); ``lognormal:C`` (``σ² = log(1+C)``, ``μ = −σ²/2``); ``pareto:A`` (scale
    ``(A−1)/A``); ``exp``, ``deterministic``."""
    if not isinstance(law, str):  # ("ph", α, T)
        return "ph", [[float(a) for a in law[1]], [[float(v) for v in row] for row in law[2]]]
    name, _, arg = law.partition(":")
    if name in ("exp", "deterministic"):
        return name, []
    x = float(arg)
    if name == "erlang":
        return name, [int(x)]
    if name == "hyperexp":
        p = (1.0 + math.sqrt((x - 1.0) / (x + 1.0))) / 2.0
        return name, [p, 2.0 * p, 2.0 * (1.0 - p)]
    if name == "lognormal":
        s2 = math.log1p(x)
        return name, [-s2 / 2.0, math.sqrt(s2)]
    if name == "pareto":
        return name, [x, (x - 1.0) / x]
    raise ValueError(f"unknown law {law!r}")


class NaiveEvents:
    """The per-queue FIFO system of docs/model.md §14 event by event, in continuous time.

    ``x[j]`` is server ``j``'s queue length and ``deps[j]`` the list of its customers'
    departure times, in order (service is FIFO at the server's speed, so each is known on
    arrival: ``max(arrival, the last departure) + S/speed``).  The next event is the earlier
    of the next arrival and the least of the servers' next departures, found by taking the
    minimum over a plain list (the kernel keeps a heap).  Servers are numbered class by
    class: server ``j`` is of the first class ``k`` with ``j < f_1 n + … + f_k n``.

    Random numbers, in the kernel's order: the first arrival time; at each arrival, the next
    arrival's time ``−log(1−u)/rate``, then the rule's choice, then the work ``S``:

    - ``jsq-d``: ``d`` servers, with replacement (or ``d = 1``) by ``d`` draws of
      :meth:`Xoshiro.below`; without by Floyd's algorithm; the least length wins, a tie among
      the sampled slots broken uniformly by reservoir sampling (one more draw per tie);
    - ``random``: ``below(n)``;
    - ``jsq`` and ``jiq``: the servers in an arrangement sorted by length, shortest first
      (``order``), kept by the same exchanges as the kernel's (a server whose length goes
      from ``ℓ`` to ``ℓ+1`` swaps with the last server of length ``ℓ``, one going to ``ℓ−1``
      with the first); ``jsq`` takes ``order[below(#shortest)]``, ``jiq``
      ``order[below(#idle)]`` if a server is idle, else ``below(n)``, and ``jbt``
      ``order[below(#shorter than d)]`` if there is one, else ``below(n)``;
    - the work: exp ``−log(1−u)``; erlang ``Σ −log(1−u_i)/K``; hyperexp ``u < p`` picks the
      phase, then an exponential of its rate; lognormal ``exp(μ + σZ)`` with Box–Muller
      ``Z = √(−2 log(1−u₁)) cos(2π u₂)``; pareto ``scale·(1−u)^(−1/A)``; deterministic 1
      (no draw); phase-type ``("ph", α, T)`` walked phase by phase (:meth:`_phase_type`).

    Measured: the count per class and level and its time integral, and per customer who
    arrives at or after ``t_meas`` its sojourn, its wait and its server's class.
    """

    def __init__(self, class_counts, speeds, d, replace, policy, law, rate, words, t_meas=0.0):
        self.sizes = [int(v) for v in class_counts]
        self.n = sum(self.sizes)
        self.speeds = [float(v) for v in speeds]
        self.d, self.replace, self.policy = int(d), bool(replace), policy
        self.law, self.par = service_params(law)
        self.rate = float(rate)
        self.rng = Xoshiro(words)
        self.t_meas = float(t_meas)
        self.cls = [k for k, m in enumerate(self.sizes) for _ in range(m)]
        self.x = [0] * self.n
        self.lastdep = [0.0] * self.n
        self.deps: list[list[float]] = [[] for _ in range(self.n)]
        self.order = list(range(self.n))
        self.now = 0.0
        self.area: dict[tuple[int, int], float] = {}
        self.so: list[float] = []
        self.wa: list[float] = []
        self.rc: list[int] = []
        self.next_arrival = self._exp() / self.rate

    def _exp(self) -> float:
        return -math.log(1.0 - self.rng.double())

    def counts(self) -> list[list[int]]:
        """``c[k][ℓ] = #{servers of class k with length >= ℓ}``, ``ℓ = 0..max length``."""
        top = max(self.x)
        return [
            [sum(1 for j in range(self.n) if self.cls[j] == k and self.x[j] >= ell) for ell in range(top + 1)]
            for k in range(len(self.sizes))
        ]

    def _shorter(self, ell: int) -> int:
        """The number of servers shorter than ``ell`` (the start of length ``ell``'s block)."""
        return sum(1 for v in self.x if v < ell)

    def _choose(self) -> int:
        below, x, n, d = self.rng.below, self.x, self.n, self.d
        if self.policy == "random":
            return below(n)
        if self.policy == "jsq":
            m = min(x)
            return self.order[below(self._shorter(m + 1))]
        if self.policy == "jiq":
            idle = self._shorter(1)
            return self.order[below(idle)] if idle else below(n)
        if self.policy == "jbt":  # join-below-threshold, T = d: a uniform server shorter than d, if any
            b = self._shorter(d)
            return self.order[below(b)] if b else below(n)
        # the least length over the d slots, ties uniform (reservoir sampling over the
        # slots: a tie draws below(ties) as soon as it is seen)
        j, ties = -1, 0
        chosen: list[int] = []
        for r in range(d):
            if self.replace or d == 1:
                q = below(n)
            else:  # Floyd: the r-th of d distinct servers
                q = below(n - d + r + 1)
                if q in chosen:
                    q = n - d + r
                chosen.append(q)
            if j < 0 or x[q] < x[j]:
                j, ties = q, 1
            elif x[q] == x[j]:
                ties += 1
                if below(ties) == 0:
                    j = q
        return j

    def _work(self) -> float:
        law, par = self.law, self.par
        if law == "exp":
            return self._exp()
        if law == "deterministic":
            return 1.0
        if law == "erlang":
            return sum(self._exp() for _ in range(par[0])) / par[0]
        if law == "hyperexp":
            r = par[1] if self.rng.double() < par[0] else par[2]  # the phase first, then its time
            return self._exp() / r
        if law == "lognormal":
            u1 = 1.0 - self.rng.double()
            u2 = self.rng.double()
            return math.exp(par[0] + par[1] * math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2))
        if law == "pareto":
            return par[1] * (1.0 - self.rng.double()) ** (-1.0 / par[0])
        if law == "ph":
            return self._phase_type(*par)
        raise AssertionError(law)

    def _phase_type(self, alpha, T) -> float:
        """A ``PH(α, T)`` time walked phase by phase: a uniform picks the first phase from
        ``α``; in phase ``φ`` an exponential of rate ``−T[φ][φ]``, then a uniform picks the
        next phase ``ψ ≠ φ`` with probability ``T[φ][ψ]/(−T[φ][φ])``, or absorption."""
        m = len(alpha)
        u, acc, ph = self.rng.double(), 0.0, m - 1
        for i, a in enumerate(alpha):
            acc += a
            if u < acc:
                ph = i
                break
        t = 0.0
        while True:
            rate = -T[ph][ph]
            t += self._exp() / rate
            u, acc, nxt = self.rng.double(), 0.0, -1
            for j in range(m):
                acc += 0.0 if j == ph else T[ph][j] / rate
                if u < acc:
                    nxt = j
                    break
            if nxt < 0:
                return t
            ph = nxt

    def _swap_to(self, j: int, p: int) -> None:
        """Exchange server ``j`` with the server at position ``p`` of the arrangement."""
        order = self.order
        pj = order.index(j)
        order[pj], order[p] = order[p], order[pj]

    def step(self) -> None:
        """One event: the earliest departure if it comes before the next arrival, else the arrival."""
        busy = [j for j in range(self.n) if self.deps[j]]
        jd = min(busy, key=lambda j: self.deps[j][0]) if busy else -1
        t = self.deps[jd][0] if busy and self.deps[jd][0] < self.next_arrival else self.next_arrival
        c = self.counts()  # integrate the counts up to the event
        for k, row in enumerate(c):
            for ell, v in enumerate(row):
                self.area[k, ell] = self.area.get((k, ell), 0.0) + v * (t - self.now)
        self.now = t
        if busy and self.deps[jd][0] < self.next_arrival:
            self.deps[jd].pop(0)
            ell = self.x[jd]
            if self.policy in ("jsq", "jiq", "jbt"):
                self._swap_to(jd, self._shorter(ell))  # the first of length ell
            self.x[jd] = ell - 1
            return
        self.next_arrival = t + self._exp() / self.rate
        j = self._choose()
        k = self.cls[j]
        work = self._work() / self.speeds[k]
        ell = self.x[j]
        start = t if ell == 0 else self.lastdep[j]
        dep = start + work
        self.lastdep[j] = dep
        self.deps[j].append(dep)
        if self.policy in ("jsq", "jiq", "jbt"):
            self._swap_to(j, self._shorter(ell + 1) - 1)  # the last of length ell
        self.x[j] = ell + 1
        if t >= self.t_meas:
            self.so.append(dep - t)
            self.wa.append(start - t)
            self.rc.append(k)


# --------------------------------------------------------------------------- phase-type service
class NaivePhase:
    """The counts chain with phase-type service ``PH(α, T)`` (docs/model.md §13) as a jump
    chain: ``N[ℓ][φ]`` queues of length ``ℓ`` whose customer in service is in phase ``φ``.

    From a state the total rate is ``R = nλ + Σ_φ μ_φ B_φ`` (``μ_φ = −T[φ][φ]``, ``B_φ`` the
    servers in phase ``φ``); the holding time is exponential of rate ``R`` (one uniform,
    ``holding_exp``) or its mean ``1/R`` (no draw); one more uniform precedes the first
    event when it is drawn.  An event takes one uniform ``u``:

    - ``uR < nλ``: an arrival, joining length ``ℓ = #{i ≥ 1 : U < P_i}`` with ``U = uR/(nλ)``;
      a second uniform ``v`` gives the phase: at an idle queue the first ``φ`` with
      ``α_1 + … + α_φ > v``; otherwise the joined queue is a uniform one of length ``ℓ``,
      phase ``φ`` with probability ``N[ℓ][φ]/(c_ℓ − c_{ℓ+1})`` (the first ``φ`` with
      ``N[ℓ][0] + … + N[ℓ][φ] > v(c_ℓ − c_{ℓ+1})``);
    - otherwise a phase event: with ``w = uR − nλ``, phase ``φ`` is the first with
      ``μ_0 B_0 + … + μ_φ B_φ > w``, its queue the ``⌊(w − …)/μ_φ⌋``-th of the ``B_φ`` in
      phase ``φ`` ordered by length (shortest first); a uniform ``v`` picks the move: the
      first ``ψ ≠ φ`` whose cumulative rate ``Σ T[φ][ψ']`` exceeds ``vμ_φ``, else completion
      (never from a phase with no exit rate), after which, if the queue still holds a
      customer, a uniform picks its phase from ``α``.

    ``policy`` is the dispatch rule (:data:`RULES`): the arrival's ``P_i`` is the rule's
    (:meth:`P_levels`, from its definition: JSQ(d)'s, ``c_i/n``, ``1{c_i = n}``, and JIQ's
    ``1{c_1 = n}·c_i/n``, recomputed at every level from the whole state at every event,
    where the kernel updates the changed level and refreshes all of them when ``c_1``
    reaches or leaves ``n``); every rule looks at lengths only, so the joined queue is a
    uniform one of its length and the phase draw is the same.
    """

    def __init__(self, n, d, lam, replace, alpha, T, words, holding_exp, N=None, policy="jsq-d"):
        if policy not in RULES:
            raise ValueError(f"policy must be one of {', '.join(RULES)}; got {policy!r}")
        self.policy = policy
        self.n, self.d, self.replace = int(n), int(d), bool(replace)
        self.nlam = self.n * float(lam)
        self.alpha = [float(a) for a in alpha]
        self.T = [[float(v) for v in row] for row in T]
        self.K = len(self.alpha)
        self.mu = [-self.T[f][f] for f in range(self.K)]
        self.exit = [-sum(row) for row in self.T]
        self.rng = Xoshiro(words)
        self.holding_exp = bool(holding_exp)
        # N[ℓ] for ℓ = 0..top (row 0 unused, zeros)
        self.N = [[int(v) for v in row] for row in (N if N is not None else [[0] * self.K])]
        self.N[0] = [0] * self.K
        while len(self.N) > 1 and not any(self.N[-1]):
            self.N.pop()
        self.now = 0.0
        self.areaN: dict[tuple[int, int], float] = {}
        self.areaP: dict[int, float] = {}
        self.t_next = self.now + self._holding()

    @property
    def B(self) -> list[int]:
        return [sum(self.N[ell][f] for ell in range(1, len(self.N))) for f in range(self.K)]

    def c(self, ell: int) -> int:
        """``c_ℓ`` (``c_0 = n``)."""
        if ell == 0:
            return self.n
        return sum(sum(row) for row in self.N[ell:])

    def _rate(self) -> float:
        return self.nlam + sum(m * b for m, b in zip(self.mu, self.B))

    def P_levels(self) -> list[float]:
        """``P_i`` of the rule for ``i = 1..top`` at the current state (docs/model.md §2,
        "Other dispatch rules"), correctly rounded from exact integers."""
        n, top = self.n, len(self.N) - 1
        c = [self.c(i) for i in range(1, top + 1)]
        if self.policy == "jsq-d":
            return [_p_exact(ci, n, self.d, self.replace) for ci in c]
        if self.policy == "jsq":  # the shortest of all n has length >= i only if every queue has
            return [1.0 if ci == n else 0.0 for ci in c]
        if self.policy == "jiq" and self.c(1) < n:  # an idle queue is joined while there is one
            return [0.0] * top
        return [ci / n for ci in c]  # random, and JIQ with no queue idle: a uniform queue

    def _holding(self) -> float:
        R = self._rate()
        if self.holding_exp:
            return -math.log(1.0 - self.rng.double()) / R
        return 1.0 / R

    def _from_alpha(self, v: float) -> int:
        acc = 0.0
        for f, a in enumerate(self.alpha):
            acc += a
            if acc > v:
                return f
        return self.K - 1

    def _add(self, ell: int, f: int, delta: int) -> None:
        while len(self.N) <= ell:
            self.N.append([0] * self.K)
        self.N[ell][f] += delta
        while len(self.N) > 1 and not any(self.N[-1]):
            self.N.pop()

    def step(self) -> None:
        t = self.t_next
        P = self.P_levels()
        for ell in range(1, len(self.N)):  # integrate N and P up to the event
            for f in range(self.K):
                self.areaN[ell, f] = self.areaN.get((ell, f), 0.0) + self.N[ell][f] * (t - self.now)
            self.areaP[ell] = self.areaP.get(ell, 0.0) + P[ell - 1] * (t - self.now)
        self.now = t
        x = self.rng.double() * self._rate()
        if x < self.nlam:
            U = x / self.nlam
            ell = sum(1 for p in P if p > U)
            v = self.rng.double()
            if ell == 0:
                f = self._from_alpha(v)
            else:
                y = v * (self.c(ell) - self.c(ell + 1))
                acc, f = 0, 0
                for f in range(self.K):
                    acc += self.N[ell][f]
                    if acc > y:
                        break
                self._add(ell, f, -1)
            self._add(ell + 1, f, 1)
        else:
            w = x - self.nlam
            B = self.B
            acc = 0.0
            for f in range(self.K):
                if acc + self.mu[f] * B[f] > w or f == self.K - 1:
                    break
                acc += self.mu[f] * B[f]
            y = min((w - acc) / self.mu[f], B[f] - 0.5)  # which of the B_f, shortest first
            seen = 0
            for ell in range(1, len(self.N)):
                seen += self.N[ell][f]
                if seen > y:
                    break
            v = self.rng.double() * self.mu[f]
            to, cum = self.K, 0.0
            for g in range(self.K):
                if g != f:
                    cum += self.T[f][g]
                if cum > v or (g == self.K - 1 and self.exit[f] == 0.0):
                    to = g
                    break
            self._add(ell, f, -1)
            if to < self.K:
                self._add(ell, to, 1)
            elif ell >= 2:
                self._add(ell - 1, self._from_alpha(self.rng.double()), 1)
        self.t_next = self.now + self._holding()


# --------------------------------------------------------------------------- the FIFO simulator
class NaiveFifo:
    """The FIFO system of docs/model.md §10 (JSQ(d), exponential(1) work) customer by
    customer, in continuous time, as ``engines/fifo.py`` draws it: ``deps[q]`` lists queue
    ``q``'s departure times in order; the next event is the next arrival unless a queue's
    first departure comes strictly earlier (the least, the lowest-numbered queue among
    equals).  An arrival samples ``d`` queues, with replacement by ``d`` draws of
    :meth:`Xoshiro.below`, without by a partial Fisher–Yates shuffle of a permutation kept
    from one arrival to the next (slot ``j`` exchanged with ``j + below(n − j)``), and joins
    the first sampled queue of least length; then its work ``−log(1−u)`` and the next
    arrival's time ``−log(1−u)/(nλ)``.  Measured from ``t_meas``: ``∫ P_i dt``, ``∫ c_i dt``,
    the measured time, and per customer arriving at or after ``t_meas`` its sojourn, wait
    and the length it joined."""

    def __init__(self, n, d, lam, replace, words, first_arrival, t_meas):
        self.n, self.d, self.replace = int(n), int(d), bool(replace)
        self.rate = self.n * float(lam)
        self.rng = Xoshiro(words)
        self.deps: list[list[float]] = [[] for _ in range(self.n)]
        self.perm = list(range(self.n))
        self.now, self.next_arrival, self.t_meas = 0.0, float(first_arrival), float(t_meas)
        self.area_P: dict[int, float] = {}
        self.area_c: dict[int, float] = {}
        self.measured = 0.0
        self.so: list[float] = []
        self.wa: list[float] = []
        self.jl: list[int] = []

    def counts(self) -> list[int]:
        """``c_i``, ``i = 1..`` the longest queue."""
        top = max(len(q) for q in self.deps)
        return [sum(1 for q in self.deps if len(q) >= i) for i in range(1, top + 1)]

    def _exp(self) -> float:
        return -math.log(1.0 - self.rng.double())

    def step(self) -> None:
        busy = [q for q in range(self.n) if self.deps[q]]
        qd = min(busy, key=lambda q: self.deps[q][0]) if busy else -1
        arrival = not busy or self.next_arrival <= self.deps[qd][0]
        t = self.next_arrival if arrival else self.deps[qd][0]
        lo = max(self.now, self.t_meas)
        if t > lo:
            for i, ci in enumerate(self.counts(), start=1):
                self.area_P[i] = self.area_P.get(i, 0.0) + _p_exact(ci, self.n, self.d, self.replace) * (t - lo)
                self.area_c[i] = self.area_c.get(i, 0.0) + ci * (t - lo)
            self.measured += t - lo
        self.now = t
        if not arrival:
            self.deps[qd].pop(0)
            return
        below, perm = self.rng.below, self.perm
        sampled = []
        for j in range(self.d):
            if self.replace:
                sampled.append(below(self.n))
            else:
                k = j + below(self.n - j)
                perm[j], perm[k] = perm[k], perm[j]
                sampled.append(perm[j])
        best = min(sampled, key=lambda q: len(self.deps[q]))  # the first of least length
        ell = len(self.deps[best])
        start = max(t, self.deps[best][-1]) if ell else t
        dep = start + self._exp()
        self.deps[best].append(dep)
        if t >= self.t_meas:
            self.so.append(dep - t)
            self.wa.append(start - t)
            self.jl.append(ell)
        self.next_arrival = t + self._exp() / self.rate


# --------------------------------------------------------------------------- the perfect sampler
class NaivePast:
    """The dominating process ``D`` of docs/model.md §12 (random routing: ``n`` independent
    M/M/1 queues, reversible) generated into the past in sorted form, with the innovation
    codes that drive the JSQ(d) copies forwards, as ``engines/perfect.py`` draws them.

    ``x`` is the sorted vector of lengths, longest first; the counts ``c_m`` are counted from
    it when needed.  One generated step takes a uniform ``u`` and a position ``p =
    below(n)`` with length ``v``:

    - ``u < λ/(1+λ)`` (going back, an arrival: forwards, a departure from a queue of length
      ``v + 1``): the leftmost queue of length ``v`` grows; the code is a departure at a
      uniform position among the queues of length ``v + 1`` after the move;
    - else, ``v > 0`` (going back a departure; forwards an arrival to a queue of length
      ``w = v − 1``): the rightmost queue of length ``v`` shrinks; the arrival's first choice
      ``J_1`` is uniform among the positions of length ``w`` after the move, and the code is
      an arrival at ``max(J_1, …, J_d)`` (:meth:`conditional_max`);
    - else (``v = 0``, no move of ``D``): a departure at a uniform empty position.
    """

    def __init__(self, x, n, d, lam, replace, words):
        self.n, self.d, self.replace = int(n), int(d), bool(replace)
        self.p = float(lam) / (1.0 + float(lam))
        self.x = sorted((int(v) for v in x), reverse=True)
        self.rng = Xoshiro(words)
        self.top = self.pathmax = max(self.x)

    def c(self, m: int) -> int:
        return sum(1 for v in self.x if v >= m)

    def conditional_max(self, j1: int) -> int:
        """``max(J_1, …, J_d)`` given ``J_1 = j1``: the others i.i.d. uniform (with
        replacement: ``d − 1`` draws of ``below(n)`` up to 64 of them, above by inversion,
        the least ``r`` with ``((r+1)/n)^(d−1) >= u`` in exact arithmetic), or a uniform
        sample of distinct positions other than ``j1`` (without: by rejection when
        ``(d−1)² <= n − 1``, otherwise top-down: the largest of the ``top`` remaining others
        is sampled with probability ``(d−1)/top``)."""
        from fractions import Fraction

        k, n, below = self.d - 1, self.n, self.rng.below
        if k <= 0:
            return j1
        if self.replace:
            if k <= 64:
                return max([j1] + [below(n) for _ in range(k)])
            u = Fraction(1.0 - self.rng.double())
            r = next(r for r in range(n) if (r + 1) ** k >= u * n**k)
            return max(r, j1)
        others = n - 1
        if k * k > others:
            top = others
            while below(top) >= k:
                top -= 1
            q = top - 1  # the largest other, as an index among the positions other than j1
            return max(q + (q >= j1), j1)
        picks: set[int] = set()
        while len(picks) < k:
            q = below(n)
            if q != j1:
                picks.add(q)
        return max(max(picks), j1)

    def step(self) -> int:
        """One generated step of ``D``; returns its code (``p + 1``: a forward arrival at
        position ``p``; ``−(p + 1)``: a forward departure at position ``p``)."""
        x, n, below = self.x, self.n, self.rng.below
        if self.rng.double() < self.p:
            v = x[below(n)]
            x[x.index(v)] += 1  # the leftmost of length v
            self.top = max(self.top, v + 1)
            self.pathmax = max(self.pathmax, self.top)
            first = self.c(v + 2)
            return -(first + below(self.c(v + 1) - first) + 1)
        v = x[below(n)]
        if v == 0:
            first = self.c(1)
            return -(first + below(n - first) + 1)
        x[n - 1 - x[::-1].index(v)] -= 1  # the rightmost of length v
        self.top = max(x)
        first = self.c(v)
        j1 = first + below(self.c(v - 1) - first)
        return self.conditional_max(j1) + 1


def apply_code(x: list[int], code: int) -> int:
    """One forward step of a JSQ(d) copy in sorted form (``x`` longest first): an arrival at
    position ``p`` makes the leftmost queue of ``x[p]``'s length one longer, a departure at
    ``p`` the rightmost one shorter (none if it is empty).  Returns the change of the total."""
    if code > 0:
        v = x[code - 1]
        x[x.index(v)] += 1
        return 1
    v = x[-code - 1]
    if v == 0:
        return 0
    x[len(x) - 1 - x[::-1].index(v)] -= 1
    return -1


class NaiveClasses:
    """The per-class count chain with server classes and exponential service (docs/model.md
    §15.1), uniformized, one event per step; time is the event count (the engine has no
    continuous-time mode: one event is ``1/(n s̄ (1+λ))`` on average).

    The state is, for each class ``k``, the multiset of its ``n_k`` queue lengths, kept as a
    list sorted longest first (``x[k]``); the profile ``c_{k,i} = #{j : x[k][j] >= i}`` and the
    totals ``C_i = Σ_k c_{k,i}`` are counted from it when asked.  Random numbers, in the
    kernel's order:

    - one 53-bit uniform ``u``; an arrival when ``u < p = λ/(1+λ)``;
    - arrival: the joined length ``ℓ = #{i >= 1 : P_i(C) > u/p}`` for the rule's ``P_i`` of
      §2 (:meth:`P`); then, with two classes or more, a second uniform ``v``: the joined server
      is server ``⌊v M⌋`` of the ``M = C_ℓ − C_{ℓ+1}`` servers of length exactly ``ℓ`` listed
      class by class (uniform among them, §15.1), so class ``k`` with probability
      ``(c_{k,ℓ} − c_{k,ℓ+1})/M``; one of its servers of length ``ℓ`` gets a customer;
    - departure: ``y = (u − p)/(1 − p) · Σ_k n_k s_k``, a uniform unit of capacity; the class
      ``k`` whose share ``[Σ_{k'<k} n_k' s_k', Σ_{k'<=k} n_k' s_k')`` holds ``y``, and its
      server ``⌊(y − Σ_{k'<k} n_k' s_k')/s_k⌋`` in the longest-first order (the last class and
      its last server where rounding puts ``y`` at the very top); if that server is busy it
      loses a customer (so a class-``k`` server completes at rate ``s_k``).

    ``area[(k, i)]``: the sum over events of ``c_{k,i}`` just after the event (``i >= 0``,
    with ``c_{k,0} = n_k``): the jump chain's states ``X_1..X_E``, each held one unit, as the
    kernel counts (the other engines' discrete time integrates ``X_0..X_{E-1}``, the state
    before each event; the two differ by ``c(X_E) − c(X_0)``).  Added step by step (the
    kernel adds it lazily, level by level).
    """

    def __init__(self, class_counts, speeds, d, lam, replace, policy, words, lengths=None):
        if policy not in (*RULES, "jbt"):
            raise ValueError(f"policy must be one of {', '.join(RULES)}, jbt; got {policy!r}")
        self.sizes = [int(m) for m in class_counts]
        self.K = len(self.sizes)
        self.n = sum(self.sizes)
        self.speeds = [float(s) for s in speeds]
        self.d, self.lam, self.replace, self.policy = int(d), float(lam), bool(replace), policy
        self.p = self.lam / (1.0 + self.lam)
        self.cum = []  # Σ_{k' <= k} n_k' s_k'
        acc = 0.0
        for m, s in zip(self.sizes, self.speeds):
            acc += m * s
            self.cum.append(acc)
        self.rng = Xoshiro(words)
        if lengths is None:
            lengths = [[0] * m for m in self.sizes]
        self.x = [sorted((int(v) for v in xs), reverse=True) for xs in lengths]
        assert [len(xs) for xs in self.x] == self.sizes
        self.steps = 0
        self.area: dict[tuple[int, int], int] = {}
        self.last_join: tuple[int, list[int]] | None = None  # the last arrival's ℓ, servers of length ℓ per class

    # ------------------------------------------------------------------ the profile
    def top(self) -> int:
        return max((xs[0] for xs in self.x if xs), default=0)

    def c(self, k: int, i: int) -> int:
        """``c_{k,i}``: class-``k`` servers with at least ``i`` customers."""
        return sum(1 for v in self.x[k] if v >= i)

    def C(self, i: int) -> int:
        return sum(self.c(k, i) for k in range(self.K))

    def profile(self) -> list[list[int]]:
        """``c_{k,i}`` for ``i = 0..top``, one row per class."""
        top = self.top()
        return [[self.c(k, i) for i in range(top + 1)] for k in range(self.K)]

    # ------------------------------------------------------------------ the rule
    def P(self, i: int) -> float:
        """``P_i``: the probability that the joined queue has length ``>= i`` (§2, §15.1),
        from exact integers: ``(C/n)^d`` or ``C(C,d)/C(n,d)`` (jsq-d), ``C/n`` (random),
        ``1{C = n}`` (jsq), ``1{C_1 = n}·C/n`` (jiq), with ``C = C_i``; jbt (``T = d``): a uniform
        server of the ``n − C_T`` shorter than ``T`` while there is one, ``(C_i − C_T)/(n − C_T)``
        for ``i < T`` and 0 from ``T`` on, else a uniform server, ``C_i/n``."""
        Ci = self.C(i)
        if self.policy == "jbt":
            CT = self.C(self.d)
            if CT < self.n:
                return (Ci - CT) / (self.n - CT) if i < self.d else 0.0
            return Ci / self.n
        if self.policy == "jsq-d":
            return _p_exact(Ci, self.n, self.d, self.replace)
        if self.policy == "jsq":
            return 1.0 if Ci == self.n else 0.0
        if self.policy == "jiq" and self.C(1) < self.n:
            return 0.0
        return Ci / self.n

    # ------------------------------------------------------------------ one event
    def step(self) -> str:
        """One event; returns its kind: ``"arrival k"``, ``"departure k"`` or ``"idle k"``
        (a potential departure at an idle class-``k`` server)."""
        kind = self._event()
        self.steps += 1
        for k, xs in enumerate(self.x):  # the count this event leaves, for one unit of time
            for i in range(xs[0] + 1 if xs else 1):
                self.area[(k, i)] = self.area.get((k, i), 0) + sum(1 for v in xs if v >= i)
        return kind

    def _event(self) -> str:
        u = self.rng.double()
        if u < self.p:
            U = u / self.p
            ell = sum(1 for i in range(1, self.top() + 1) if self.P(i) > U)
            exact = [sum(1 for v in xs if v == ell) for xs in self.x]  # servers of length ℓ per class
            self.last_join = (ell, exact)
            k = 0
            if self.K > 1:
                pick = int(self.rng.double() * sum(exact))  # the joined one among them, class by class
                while pick >= exact[k]:
                    pick -= exact[k]
                    k += 1
            xs = self.x[k]
            xs[xs.index(ell)] += 1  # the first of length ℓ: the list stays sorted
            return f"arrival {k}"
        y = (u - self.p) / (1.0 - self.p) * self.cum[-1]
        k = next((k for k in range(self.K) if y < self.cum[k]), self.K - 1)
        z = (y - (self.cum[k - 1] if k else 0.0)) / self.speeds[k]
        j = min(int(z), self.sizes[k] - 1)
        xs = self.x[k]
        ell = xs[j]
        if ell == 0:
            return f"idle {k}"
        xs[len(xs) - 1 - xs[::-1].index(ell)] -= 1  # the last of length ℓ: the list stays sorted
        return f"departure {k}"

    def run(self, steps: int) -> None:
        for _ in range(steps):
            self.step()
