"""The scenarios, one module per family; each exposes `run(rig) -> list[Result]`."""
