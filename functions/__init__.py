"""Entry points of the serverless functions: the AWS Lambda handlers (one per function in
template.yaml), the worker entry that every invoker runs a step with, and the handlers' local
stand-ins for `lakestats watch`. Nothing in the project imports them; invokers name them."""
