/**
 * The recipe's client request (a curl against http://localhost:8000) pointed at a real endpoint.
 * With an API key the request sends `Authorization: Bearer $VLLM_API_KEY`, read from the caller's
 * environment so the key itself never appears here.
 */
export function clientCommand(recipeClient: string, endpoint: string, withApiKey: boolean): string {
  const command = recipeClient.replace(/https?:\/\/localhost(:\d+)?/, endpoint);
  if (!withApiKey) return command;
  return command.replace(/^curl /, 'curl -H "Authorization: Bearer $VLLM_API_KEY" ');
}
