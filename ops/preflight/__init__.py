"""Before the first step of a lifecycle: every value the settings name checked
(`ops.preflight.checks`) and the whole LLM bill estimated from the settings alone, against
the spending limit in force (`ops.preflight.bill`).  Both run in seconds, send no LLM
request (one request to see that the endpoint answers), and store nothing, so a bad value or
a bill above the limit stops the runner before any work."""
