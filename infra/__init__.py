"""The local stack (embedded Redis, S3 endpoints) and deployment helpers around template.yaml."""
