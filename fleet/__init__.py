"""Running steps on the fleet of functions: the step protocol (every event, result and Redis
key), the Redis connections, a job's records, the exchange between workers, reduction windows,
the one fan-out, and the invokers (local processes, AWS Lambda)."""
