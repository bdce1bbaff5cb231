"""template.yaml: SAM's own translator, a deployment to moto's CloudFormation, `sam validate
--lint`, least-privilege IAM, and the size of the functions' package."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import uuid
import zipfile
from pathlib import Path

import boto3
import pytest
from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse

from lakestats.metastore.layout import object_events_pattern

ROOT = Path(__file__).resolve().parent.parent
SAM = ROOT / ".venv-sam" / "bin" / "sam"
LAMBDA_LIMIT_BYTES = 250 * 1024 * 1024
PARAMETERS = {"DataBucketName": f"lake-{uuid.uuid4().hex[:8]}",      # bucket names are global
              "TablePrefixes": "tables/orders,tables/lineitem",
              "RedisUrl": "redis://monostore.internal:6379",
              "SubnetIds": "subnet-1,subnet-2", "SecurityGroupIds": "sg-1"}


class NoManagedPolicies:
    """The translator looks managed policy names up in IAM; the template names none."""
    def load(self):
        return {}


@pytest.fixture(scope="module")
def translated(s3_endpoint) -> dict:      # s3_endpoint: the region and the fake account
    template = yaml_parse((ROOT / "template.yaml").read_text())
    # as `sam package` does: the local code directory becomes the uploaded package
    template["Globals"]["Function"]["CodeUri"] = "s3://deploy-artifacts/lakestats.zip"
    return transform(template, PARAMETERS, NoManagedPolicies())


def of_type(cfn: dict, kind: str) -> dict:
    return {k: r for k, r in cfn["Resources"].items() if r["Type"] == kind}


def test_event_flow_wiring(translated):
    resources = translated["Resources"]
    notifications = resources["DataBucket"]["Properties"]["NotificationConfiguration"]
    assert notifications == {"EventBridgeConfiguration": {"EventBridgeEnabled": True}}
    rule = resources["ObjectEvents"]["Properties"]
    assert rule["Targets"] == [{"Id": "events-queue", "Arn": {"Fn::GetAtt": ["EventsQueue",
                                                                               "Arn"]}}]
    # the pattern the local stack wires (functions/notifications.py), for the stack's bucket
    pattern = json.loads(json.dumps(rule["EventPattern"]).replace(
        '{"Ref": "DataBucketName"}', json.dumps(PARAMETERS["DataBucketName"])))
    assert pattern == object_events_pattern(PARAMETERS["DataBucketName"])
    sender = resources["EventsQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"][0]
    assert sender["Principal"] == {"Service": "events.amazonaws.com"}
    assert sender["Condition"] == {"ArnEquals": {"aws:SourceArn": {
        "Fn::GetAtt": ["ObjectEvents", "Arn"]}}}
    for queue, dead in (("EventsQueue", "EventsDeadLetterQueue"),
                        ("ReduceQueue", "ReduceDeadLetterQueue")):
        assert resources[queue]["Properties"]["RedrivePolicy"]["deadLetterTargetArn"] == {
            "Fn::GetAtt": [dead, "Arn"]}
    mappings = {m["Properties"]["FunctionName"]["Ref"]: m["Properties"]
                for m in of_type(translated, "AWS::Lambda::EventSourceMapping").values()}
    assert mappings["PartitionStatsFunction"]["EventSourceArn"] == {
        "Fn::GetAtt": ["EventsQueue", "Arn"]}
    assert mappings["TableReduceFunction"]["EventSourceArn"] == {
        "Fn::GetAtt": ["ReduceQueue", "Arn"]}
    assert all(m["FunctionResponseTypes"] == ["ReportBatchItemFailures"] for m in mappings.values())
    url = of_type(translated, "AWS::Lambda::Url")
    assert [u["Properties"]["AuthType"] for u in url.values()] == ["AWS_IAM"]
    functions = of_type(translated, "AWS::Lambda::Function")
    assert len(functions) == 4
    for f in functions.values():
        p = f["Properties"]
        assert p["Runtime"] == "python3.12" and p["VpcConfig"]["SubnetIds"]
        env = p["Environment"]["Variables"]
        assert env["POWERTOOLS_SERVICE_NAME"] == "lakestats" and env["LAKESTATS_BINS"]
        assert "CreateCache" in json.dumps(env["REDIS_URL"])      # new cache, or yours
    assert resources["Cache"]["Condition"] == "CreateCache"


def statements(policy: dict) -> list[dict]:
    """A policy's statements, both branches of a condition's included."""
    out = []
    for statement in policy["PolicyDocument"]["Statement"]:
        if "Fn::If" in statement:
            out += [s for s in statement["Fn::If"][1:] if s != {"Ref": "AWS::NoValue"}]
        else:
            out.append(statement)
    return out


def as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def test_iam_is_least_privilege(translated):
    """Inline policies: no wildcard action, no write on a wildcard resource, S3 writes only
    below the statistics prefixes, the Redis secret readable only when given. (The roles also
    get AWS's managed policies for logs, VPC network interfaces and X-Ray.)"""
    writes = ("Put", "Delete", "Send", "Invoke", "Create", "Update")
    secrets = 0
    for name, role in of_type(translated, "AWS::IAM::Role").items():
        for policy in role["Properties"].get("Policies", []):
            for statement in statements(policy):
                actions, resources = as_list(statement["Action"]), as_list(statement["Resource"])
                assert not any("*" in a for a in actions), (name, actions)
                if any(w in a for a in actions for w in writes):
                    assert "*" not in resources, (name, statement)
                if any(a.startswith("s3:") and w in a for a in actions for w in writes):
                    assert all(r["Fn::Sub"].endswith("/_lakestats/*") for r in resources), \
                        (name, statement)
                if "secretsmanager:GetSecretValue" in actions:
                    assert resources == [{"Ref": "RedisSecretArn"}], (name, statement)
                    secrets += 1
    assert secrets == 3          # the three functions that talk to Redis


def test_deploys_to_cloudformation(translated, s3_endpoint):
    """moto's CloudFormation creates the stack: buckets, queues, functions, mappings."""
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="deploy-artifacts")
    package = io.BytesIO()
    with zipfile.ZipFile(package, "w") as z:
        z.writestr("functions/__init__.py", "")
    s3.put_object(Bucket="deploy-artifacts", Key="lakestats.zip", Body=package.getvalue())
    cfn = json.loads(json.dumps(translated))
    cfn["Outputs"].pop("LookupUrl")   # moto cannot create Function URLs (asserted above)
    client = boto3.client("cloudformation")
    client.create_stack(StackName="lakestats", TemplateBody=json.dumps(cfn),
                        Parameters=[{"ParameterKey": k, "ParameterValue": v}
                                    for k, v in PARAMETERS.items()],
                        Capabilities=["CAPABILITY_IAM"])
    try:
        stack = client.describe_stacks(StackName="lakestats")["Stacks"][0]
        assert stack["StackStatus"] == "CREATE_COMPLETE", stack.get("StackStatusReason")
        created = {r["LogicalResourceId"]: r["ResourceType"] for r in
                   client.list_stack_resources(StackName="lakestats")["StackResourceSummaries"]}
        for name in ("DataBucket", "EventsQueue", "EventsDeadLetterQueue", "ReduceQueue",
                     "ObjectEvents", "PartitionStatsFunction", "TableReduceFunction",
                     "StepsFunction", "LookupFunction"):
            assert name in created, (name, sorted(created))
        assert "Cache" not in created                  # an existing Redis was given
        outputs = {o["OutputKey"] for o in stack["Outputs"]}
        assert {"EventsQueueUrl", "StepsFunctionName", "RedisUrl"} <= outputs
    finally:
        # the S3 server is the session's: its EventBridge rules (the schedule's Lambda target,
        # which moto cannot invoke, ends moto's delivery to every later rule) must not outlive
        # this test
        client.delete_stack(StackName="lakestats")


@pytest.mark.slow
def test_sam_validate_lint():
    env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1", "SAM_CLI_TELEMETRY": "0",
           "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    assert SAM.exists(), "make test installs the SAM CLI into .venv-sam"
    done = subprocess.run([str(SAM), "validate", "--lint", "--template", "template.yaml"],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_package_fits_in_lambda(tmp_path):
    """The package `sam build` makes (deploy/lambda/Makefile), measured unzipped."""
    out = tmp_path / "package"
    subprocess.run(["make", "-f", "deploy/lambda/Makefile", "package", f"ARTIFACTS_DIR={out}",
                    f"PIP={sys.executable} -m pip"], cwd=ROOT, check=True, capture_output=True)
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"functions package: {size / 2**20:.0f} MB unzipped")
    assert size < LAMBDA_LIMIT_BYTES
    package = out / "lakestats"
    assert (package / "functions" / "lambda_handlers.py").exists() and (out / "pyarrow").is_dir()
    assert (package / "fleet" / "protocol.py").exists() and (package / "algorithms").is_dir()
    # one namespace, and nothing the functions do not import: no CLI, Spark, pruning or local
    # stack; of the command-line package only the plugins' import path (lakestats.udf)
    assert not [p.name for p in out.iterdir() if p.name.startswith(
        ("pyspark", "spark_bridge", "pruning", "infra", "core", "functions", "fleet"))]
    assert sorted(p.name for p in package.iterdir()) == [
        "__init__.py", "algorithms", "core", "fleet", "formats", "functions", "metastore",
        "monostore", "udf.py"]
