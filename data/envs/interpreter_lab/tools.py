"""interpreter_lab has no tools of its own: a session works in its Jupyter kernel through the
runtime's tools (execute, interrupt, restart) and answers with submit_result."""
