"""stores: see ARCHITECTURE.md."""
