"""The built-in serving schedulers, one module each (registered on import; see hwmodel.serving.schedulers)."""
