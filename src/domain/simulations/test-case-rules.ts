// A new test case, as a client or an import sends it, and the rules it must meet before it is
// stored: a question and steps that are not blank, what its `expected_type` requires, references
// to the tenant's own agents and personas, and override maps that name tools a case may answer for.

import type { Db, SimulationExpectedType } from '../../db/index.js';
import { HANDOFF_TOOL } from '../agent/engine.js';
import { InvalidParametersError, MissingParameterError, ValidationError } from '../errors.js';
import { tenantHas } from './datasets.js';
import type { TestCaseStep } from './records.js';

export interface NewTestCase {
  question: string;
  expected_type: SimulationExpectedType;
  expected_answer?: string | null | undefined;
  expected_tool_name?: string | null | undefined;
  expected_tool_args?: Record<string, unknown> | null | undefined;
  expected_agent_id?: string | null | undefined;
  persona_id?: string | null | undefined;
  metadata?: Record<string, unknown> | undefined;
  api_data_overrides?: Record<string, unknown> | undefined;
  tool_call_overrides?: Record<string, unknown> | undefined;
  order?: number | undefined;
  steps?: TestCaseStep[] | undefined;
}

export const blank = (value: string | null | undefined) => value === undefined || value === null || value.trim() === '';

/** Override maps name tools; the engine's own handoff tool cannot be overridden. */
function checkOverrides(param: 'tool_call_overrides' | 'api_data_overrides', overrides: Record<string, unknown>) {
  for (const name of Object.keys(overrides)) {
    if (name === HANDOFF_TOOL) {
      throw new ValidationError(
        `${param}.${name}`,
        `'${HANDOFF_TOOL}' is the engine's handoff tool; it cannot be overridden.`,
      );
    }
    if (name.trim() === '' || name.length > 100) {
      throw new ValidationError(`${param}.${name}`, `${param} keys are tool names of 1 to 100 characters.`);
    }
  }
}

/** The value its `expected_type` requires of a test case. */
function checkExpectation(input: NewTestCase) {
  switch (input.expected_type) {
    case 'answer':
      if (blank(input.expected_answer)) {
        throw new MissingParameterError('expected_answer', "An 'answer' test case needs expected_answer.");
      }
      break;
    case 'tool_call':
      if (blank(input.expected_tool_name)) {
        throw new MissingParameterError('expected_tool_name', "A 'tool_call' test case needs expected_tool_name.");
      }
      break;
    case 'handoff':
      if (blank(input.expected_agent_id)) {
        throw new MissingParameterError('expected_agent_id', "A 'handoff' test case needs expected_agent_id.");
      }
      break;
    case 'no_answer':
      break;
  }
}

/** Checks a test case against the rules of its `expected_type` and the tenant's agents and personas. */
export async function checkTestCase(db: Db, tenantId: string, input: NewTestCase): Promise<void> {
  if (input.question.trim() === '') throw new ValidationError('question', 'question must not be blank.');
  (input.steps ?? []).forEach((step, i) => {
    if (step.content.trim() === '') {
      throw new ValidationError(`steps[${i}].content`, `steps[${i}].content must not be blank.`);
    }
  });
  checkExpectation(input);
  if (
    !blank(input.expected_agent_id) &&
    !(await tenantHas(db, 'agents', tenantId, input.expected_agent_id as string))
  ) {
    throw new InvalidParametersError('expected_agent_id', `No agent '${input.expected_agent_id}' in this workspace.`);
  }
  if (!blank(input.persona_id) && !(await tenantHas(db, 'simulation_personas', tenantId, input.persona_id as string))) {
    throw new InvalidParametersError('persona_id', `No simulation persona '${input.persona_id}' in this workspace.`);
  }
  checkOverrides('tool_call_overrides', input.tool_call_overrides ?? {});
  checkOverrides('api_data_overrides', input.api_data_overrides ?? {});
}
