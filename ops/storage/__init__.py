"""Values on disk that survive a crash and never need pickle: atomic writes with checksums
(`atomic`), the three formats every stored value is made of (`codec`), and the JSON-lines
checkpoint a long crawl or simulation appends to (`checkpoint`)."""
