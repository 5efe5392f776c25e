"""Measurements for choosing a multi-agent pattern: the repeated-request ratio and the call card.

- `fathom.measure.sticky`: over a set of threads, how often a turn stays in the domain (the
  subagent, skill or handoff target) its previous turn used, within an idle threshold; the
  number a stateful pattern's savings are bounded by.
- `fathom.measure.calls`: every model call of a run with its caller, the messages and tools it
  sent, its tokens and what it added to the prompt over the same caller's previous call;
  recorded by a callback (`CallRecorder`) or read from a capture of the HTTP bodies
  (`fathom.measure.capture`).

Layer: core, the lowest; it must not import any other layer of fathom.
"""
