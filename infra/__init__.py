"""The local stack: an embedded Redis, and moto's S3+SQS server with a Redis in the
background (`lakestats local up`)."""
