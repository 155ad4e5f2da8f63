"""Launch target of the failing-rank test: `dojo train`, where the rank named by
TOOLDOJO_TEST_FAIL_RANK raises in its first rollout (while the other ranks go on into the step's
collectives). Only the tests use it."""

import os
import sys

from rl.rollout import MultiTurnRollout

_run = MultiTurnRollout.run


def _failing_run(self, *args, **kwargs):
    if os.environ.get("RANK") == os.environ["TOOLDOJO_TEST_FAIL_RANK"]:
        raise RuntimeError("injected failure in this rank's rollout")
    return _run(self, *args, **kwargs)


MultiTurnRollout.run = _failing_run

if __name__ == "__main__":
    from tooldojo.cli import main

    sys.argv = ["dojo", *sys.argv[1:]]
    main()
