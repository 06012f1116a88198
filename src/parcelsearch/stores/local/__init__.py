"""stores.local: see ARCHITECTURE.md."""
