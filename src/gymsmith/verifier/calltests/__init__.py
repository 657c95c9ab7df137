"""Call checks: hidden tests whose outcomes the code under test cannot read, forge or decide.

A plain pytest module is compiled (`compiler.compile_suite`) into a *driver* — the test's statements,
with each assertion replaced by observations of the values the code under test computes — and *checks*
— the assertions' comparisons and expected values. The driver runs beside the untrusted code in a
sandbox (`runner.CallRunner.observe`, `server.py`); it sends back data on a private pipe, which the
trusted side decodes strictly (`wire.read_stream`) and judges against the checks and the reference's
types (`runner.judge_run`, `judge.outcome`). `docs/verifier.md` has the threat model and the truth table.
"""

from gymsmith.verifier.calltests.compiler import CompiledSuite, CompiledTest, UnsupportedTest, compile_suite, informative
from gymsmith.verifier.calltests.runner import CallRunner, Observation, Verdicts, judge_run, records_by_nodeid, shared_call_runner

__all__ = ["CallRunner", "CompiledSuite", "CompiledTest", "Observation", "UnsupportedTest", "Verdicts", "compile_suite", "informative",
           "judge_run", "records_by_nodeid", "shared_call_runner"]
