/**
 * The first module `polar` evaluates (imported before all others by main.ts): a serving command re-executes itself
 * here with its allocator setting (core/allocator.ts) before the rest of the program is loaded.
 */
import { tuneAllocator } from './core/allocator.ts';

tuneAllocator(process.argv[2]);
