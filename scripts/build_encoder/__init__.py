"""Export all-MiniLM-L6-v2 to the dptext sentence-encoder asset (scripts/build-encoder)."""
