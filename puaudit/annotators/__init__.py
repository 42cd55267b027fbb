"""The annotator audit: agreement statistics, latent-truth models, the CLI."""
