"""Fakes of the outside systems simab talks to, and small planted data sets, shared by the
tests and the benchmarks.

- `fakes.openai_server`: an OpenAI-compatible chat-completions endpoint (scripted agent,
  scripted replies and faults, fixed latency; aiohttp on a thread or in its own process;
  counts calls and tokens, records requests).
- `fakes.tmdb_server`: TMDB's API v3 and image CDN.
- `fakes.agents`: a tiny catalogue with planted tastes and a hashed bag-of-words embedder.
- `fakes.planted_data`: a MovieLens-shaped data set with planted tastes.
- `fakes.steam_data`: a tiny made-up data set in Steam's schema (interactions.csv, items.jsonl)
  with every caveat of the real files.
- `fakes.shared_data`: where the real MovieLens reference copies live (never committed).

For tests and benchmarks only: nothing in ops/, assets/, resources/ or pipelines/ imports
this package, and it is not installed with simab.
"""
