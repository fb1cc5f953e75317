import { runProgram } from "./program";

const outputs = runProgram();

export const endpoints = outputs.endpoints;
export const curl = outputs.curl;
export const units = outputs.units;
export const modelRevision = outputs.modelRevision;
export const deployments = outputs.deployments;
export const selection = outputs.selection;
export const warnings = outputs.warnings;
export const notes = outputs.notes;
export const scrapeTargets = outputs.scrapeTargets;
export const compileKeys = outputs.compileKeys;
export const models = outputs.models;
