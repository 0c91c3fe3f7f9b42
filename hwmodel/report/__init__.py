"""Reports shared by the studies: CSV/Markdown tables, grouped-bar plots, Perfetto (Chrome trace) timelines."""
