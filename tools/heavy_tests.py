"""Write tests/heavy.txt: the default-suite tests that take a quarter second or more.

The fast tier (``python -m pytest -q -m "not slow and not integration and not heavy"``,
CONTRIBUTING.md) leaves them out; the default suite still runs them.  Regenerate after adding
tests (on an idle machine)::

    python -m pytest -q -p no:cacheprovider -m "not slow and not integration" --durations=0 \\
        | python tools/heavy_tests.py > tests/heavy.txt
"""

from __future__ import annotations

import re
import sys

THRESHOLD_S = 0.25  # a test at least this long (setup, call or teardown) is heavy


def main() -> None:
    ids = set()
    for line in sys.stdin:
        m = re.match(r"\s*(\d+\.\d+)s (?:call|setup|teardown)\s+(\S.*?)\s*$", line)
        # a docs page's examples share one namespace, so none of them can be left out alone
        if m and float(m.group(1)) >= THRESHOLD_S and ".md::" not in m.group(2):
            ids.add(m.group(2))
    print("# tests of the default suite that take a quarter second or more (tools/heavy_tests.py); marked 'heavy'")
    for i in sorted(ids):
        print(i)


if __name__ == "__main__":
    main()
