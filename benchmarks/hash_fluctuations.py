"""One SHA-256 over the outputs of every public :mod:`supermarket.fluctuations` function
(all three regimes, both reflection schemes, the pre-limit diffusion, the LNA, ``compare``
and ``scaling``; timings left out): a refactoring that means to keep every number must
leave it unchanged.

    PYTHONPATH=src python benchmarks/hash_fluctuations.py     # per-output digests, then the total

Compare totals on one machine (continuous clocks depend on the platform's ``log``/``exp``).
"""

import hashlib
import json
import warnings

import numpy as np

from supermarket import fluctuations as fl
from supermarket.jsonable import to_jsonable

h = hashlib.sha256()


def add(label, obj):
    if isinstance(obj, np.ndarray):
        b = np.ascontiguousarray(obj).tobytes()
    else:

        def strip(o):
            if isinstance(o, dict):
                return {k: strip(v) for k, v in o.items() if k not in ("seconds", "events_per_second")}
            if isinstance(o, list):
                return [strip(v) for v in o]
            return o

        b = json.dumps(strip(to_jsonable(obj)), sort_keys=True, default=str).encode()
    d = hashlib.sha256(b).hexdigest()[:16]
    print(label, d)
    h.update(b)


warnings.simplefilter("ignore")
pa = fl.regime_a(400, 1.0, d=2)
pb = fl.regime_b(900, 1.0, 0.5)
pc = fl.regime_c(100, 1.0)
pc1 = fl.regime_c(400, 1.0, centring="one", replace=True)
for nm, p in (("a", pa), ("b", pb), ("c", pc), ("c1", pc1)):
    add("params " + nm, p.to_dict())
    add("summary " + nm, p.summary())
    add("centre " + nm, fl.centre(p.n, p.d, p.lam, replace=p.replace))
    s = fl.simulate_fluctuations(p, time=30.0, burn_in=2.0, replications=2, seed=5, workers=1, grid_dt=0.1)
    add("sim " + nm, s.to_dict())
    add("simgrid " + nm, s.grid)
    add("simacf " + nm, s.acf_z1)
    pre = fl.prelimit_sde(p, paths=40, time=3.0, burn_in=0.5, dt=1e-2, seed=2, workers=1)
    add("pre " + nm, pre.to_dict())
    add("pregrid " + nm, pre.grid)
    add("lna " + nm, fl.lna_moments(p).to_dict())
    add("lnaacf " + nm, np.array(fl.lna_acf(p, [0.0, 0.5, 1.0])))
for refl in fl.REFLECTIONS:
    r = fl.limit_sde("c", zeta=1.0, paths=40, time=3.0, burn_in=0.5, dt=1e-2, seed=3, workers=1, reflection=refl)
    add("limc " + refl, r.to_dict())
    add("limcgrid " + refl, r.grid)
r = fl.limit_sde("b", c=1.0, zeta=0.5, paths=40, time=3.0, burn_in=0.5, dt=1e-2, seed=3, workers=1)
add("limb", r.to_dict())
add("lima", fl.limit_for(pa, paths=40, time=3.0, burn_in=0.5, dt=1e-2, seed=3, workers=1).to_dict())
add("closed", fl.limit_closed_form(1.5).to_dict())
add("acfa", np.array(fl.limit_acf_a(1.5, [0, 1, 2])))
cmp = fl.compare(
    pb, time=20.0, burn_in=1.0, grid_dt=0.5, sde_paths=8, sde_time=1.0, sde_burn_in=0.2, dt=0.01, workers=1, seed=9
)
d = cmp.to_dict()
add("compare", d)
add("compare summary", "\n".join(l for l in cmp.summary().splitlines() if " s (" not in l and "events in" not in l))
sc = fl.scaling((100, 400), time=10.0, workers=1, seed=4)
add("scaling", sc.to_dict())
add("scaling summary", sc.summary())
print("TOTAL", h.hexdigest())
