"""Lifecycle steps 1–4: the data.  The tables of the configured source (`ingestion`): MovieLens (`movielens`, `movielens_download`,
`synthetic`), any domain (`domain`, `steam`, `steam_download`), metadata and posters (`tmdb`, `tmdb_match`, `local_metadata`, `poster_store`,
`synthetic_posters`), the one catalogue (`catalogue`), the chronological split (`split`), the data stage's figures (`data_figures`)."""
