# vllm-rbln serving image for platform: kubernetes. There is no public vllm-rbln image; build this
# one and set rbln-serving:kubernetes.image to where you push it. The pins match the recipe's
# installs (a test keeps them in step with recipes/minimaxai--minimax-m2.7.json).
#
#   printf '[global]\nextra-index-url =\n    https://USER:PASSWORD@pypi.rbln.ai/simple\n    https://wheels.vllm.ai/0.30.0/cpu\n    https://download.pytorch.org/whl/cpu\n' > pip.conf
#   docker build --secret id=pip_conf,src=pip.conf -t registry.example.com/ml/vllm-rbln:0.12.0 .
#   docker push registry.example.com/ml/vllm-rbln:0.12.0
#
# The RBLN driver and device nodes come from the node (RBLN NPU Operator / device plugin), not the image.
# The pods run as UID/GID 10001 (rbln-serving:kubernetes.securityContext) with a read-only root
# filesystem; they write only to mounted volumes (/tmp, /dev/shm, /var/lib/rbln-serving/*).

# Ubuntu 24.04: glibc 2.39, which the vLLM 0.30 CPU wheel needs.
FROM ubuntu:24.04

ARG REBEL_COMPILER_VERSION=0.12.0
ARG VLLM_RBLN_VERSION=0.12.0
ARG ARCTIC_INFERENCE_VERSION=0.1.1

ENV DEBIAN_FRONTEND=noninteractive \
    VIRTUAL_ENV=/opt/vllm \
    PATH=/opt/vllm/bin:$PATH \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates skopeo \
 && rm -rf /var/lib/apt/lists/* \
 && python3 -m venv /opt/vllm

# The RBLN Portal credentials stay in the build secret: they are in no layer.
# arctic-inference is installed too, so spec_decode: suffix works without another image.
RUN --mount=type=secret,id=pip_conf,target=/etc/pip.conf \
    pip install \
      "rebel-compiler==${REBEL_COMPILER_VERSION}" \
      "vllm-rbln[kv_connectors]==${VLLM_RBLN_VERSION}" \
      "arctic-inference==${ARCTIC_INFERENCE_VERSION}" \
 && python3 -c "import rebel, vllm_rbln, arctic_inference"

# A fixed non-root user, so `runAsNonRoot` can be checked; its home is a scratch volume in the pod.
RUN groupadd --gid 10001 vllm \
 && useradd --uid 10001 --gid 10001 --home-dir /tmp --no-create-home --shell /usr/sbin/nologin vllm

# The launch script comes from a ConfigMap; bash and python3 (probes) are all it needs here, and
# skopeo (with GNU tar) for the compile Jobs' registry of compiled caches (compile.registry).
WORKDIR /var/lib/rbln-serving
USER 10001:10001
