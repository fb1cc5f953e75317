/**
 * The PromQL a role's KEDA triggers run. Every series is one the pinned versions export: vLLM
 * 0.30.0's `vllm:num_requests_waiting` and `vllm:num_requests_running` (labels `model_name`,
 * `engine`; our PodMonitor adds `namespace`, `pod`, `role`, `rank`, `compile_key`),
 * llm-d-router v0.10.0's `llm_d_epp_flow_control_queue_size` (with the `flowControl` feature gate)
 * and, with scaleToZero only, kube-state-metrics' `kube_deployment_spec_replicas`.
 */

import { THRESHOLD_DECIMALS } from "../config/defaults";

const quoted = (value: string) => JSON.stringify(value);

/**
 * A threshold as every rendered text writes it (a trigger's metadata.threshold, the query's hold
 * value, an alert's comparison): rounded once to THRESHOLD_DECIMALS, as a plain decimal. So one
 * number has one spelling wherever it appears (0.8 × 3 is 2.4 everywhere, never 2.4000000000000004).
 */
export function thresholdText(value: number): string {
  return String(Number(value.toFixed(THRESHOLD_DECIMALS)));
}

/** Label matchers of one Deployment's vLLM series: its namespace and its pods, `<deployment>-<template hash>-<suffix>`. */
export function podMatchers(namespace: string, deployment: string): string {
  return `namespace=${quoted(namespace)},pod=~${quoted(`${deployment}-[a-z0-9]+-[a-z0-9]+`)}`;
}

/** Requests waiting in a role's own vLLM queues. */
export function waitingRequests(pods: string): string {
  return `sum(vllm:num_requests_waiting{${pods}})`;
}

/** Requests a role's engines run now (at most max_num_seqs per engine: RBLN compiles that batch). */
export function runningRequests(pods: string): string {
  return `sum(vllm:num_requests_running{${pods}})`;
}

/** Requests the endpoint picker's flow control holds back for the whole pool (scraped by our PodMonitor, labelled with the model). */
export function pickerQueue(namespace: string, model: string): string {
  return `sum(llm_d_epp_flow_control_queue_size{namespace=${quoted(namespace)},model=${quoted(model)}})`;
}

/** The replicas kube-state-metrics reports for a Deployment. */
export function deploymentReplicas(namespace: string, deployment: string): string {
  return `kube_deployment_spec_replicas{namespace=${quoted(namespace)},deployment=${quoted(deployment)}}`;
}

export interface TriggerQuery {
  /** The role's pods (`podMatchers`). */
  pods: string;
  /** The role's compile key now: only its pods' serving shows the compiled cache exists. */
  compileKey: string;
  /** The role's load, summed over it. */
  load: string;
  /** The trigger's threshold as its metadata writes it (thresholdText): the load per serving replica the scaler keeps to. */
  threshold: string;
  /** scaleToZero: the Deployment's replicas and the load that wakes the role when it has none (none: the trigger reads 0 then). */
  zero?: { replicas: string; wake?: string };
}

/**
 * The load per serving replica, for a trigger of metricType `Value`: the HPA then wants
 * ceil(value / threshold × ready pods) replicas, and within its tolerance of 1 keeps the count.
 *
 * While no pod of the current compile key serves (a first deploy or a change compiling, all pods
 * down), the query yields the threshold itself: the HPA neither adds a pod, which would only wait
 * for the compile, nor removes one, which would most likely be the compiling one (unready pods go
 * first). A pod of the key serves only after vllm-rbln saved its compiled graphs, so from then on a
 * new pod loads them. With scaleToZero, a role without replicas reads the load that wakes it instead.
 */
export function triggerQuery(q: TriggerQuery): string {
  const running = `vllm:num_requests_running{${q.pods}}`;
  const servingReplicas = `count(count by (pod) (${running}))`;
  const compiledKeyServes = `count(vllm:num_requests_running{${q.pods},compile_key=${quoted(q.compileKey)}})`;
  const perReplica = `((${q.load}) or vector(0)) / ${servingReplicas} and on() ${compiledKeyServes}`;
  if (!q.zero) return `(${perReplica}) or on() vector(${q.threshold})`;
  const { replicas, wake } = q.zero;
  const atZero = wake ? `((${wake}) or vector(0))` : "vector(0)";
  return `(${perReplica}) or on() (vector(${q.threshold}) and on() (${replicas} > 0)) or on() (${atZero} and on() (${replicas} == 0))`;
}
