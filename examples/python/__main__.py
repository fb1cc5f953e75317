"""MiniMax-M2.7 on two RBLN-CR13 servers behind the llm-d router's front door.

The component package's ModelServing, as Pulumi's SDK generator names it for Python: the module
pulumi_rbln_serving, every stack config key an argument in snake_case (hostKey is host_key), a
nested setting a dict with the same names, the secrets Inputs. What each argument takes is the
stack config's: README.md, "Config reference".
"""

import pulumi
import pulumi_rbln_serving as rbln_serving

config = pulumi.Config()

serving = rbln_serving.ModelServing(
    "serving",
    strategy="aggregated-data-expert-parallel",
    target="Latency",
    replicas=2,
    # Each server's public SSH host key: ssh-keyscan -t ed25519 <address> | cut -d' ' -f2-, checked out of band.
    hosts=[
        {
            "name": "npu-0",
            "address": "10.20.0.11",
            "host_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK4KT/kzlFW6kjufYTJ6G0kCzRb3Co40GrZLdpVJ7R3M",
        },
        {
            "name": "npu-1",
            "address": "10.20.0.12",
            "host_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIItmxsr36LQxZhAJFmv298yY0QHHas87rF8cF0dbkwhK",
        },
    ],
    # One front door before both replicas: the endpoint picker and Envoy on a small server of their own.
    router={
        "host": {
            "name": "door",
            "address": "10.20.0.10",
            "host_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB0xWz9ZqJ3hY1m8kT4vR2sL6pN7cQ5dE8fG1hJ2kL3m",
        },
        "port": 8080,
    },
    axes={"spec_decode": "suffix"},
    pip={"username": "rbln-portal-user"},
    cache_root="/data/rbln-serving",
    min_free_disk_gb_to_restart=80,
    # One server at a time; a count is a string here, a percentage too ("50%").
    rollout={"max_unavailable": "1"},
    ssh_private_key=config.require_secret("sshPrivateKey"),
    pip_password=config.require_secret("pipPassword"),
)

pulumi.export("endpoints", serving.endpoints)
pulumi.export("curl", serving.curl)
pulumi.export("units", serving.units)
pulumi.export("model_revision", serving.model_revision)
pulumi.export("warnings", serving.warnings)
pulumi.export("notes", serving.notes)
