python3 .probe/info.py > $OUT/info.txt 2>&1
for m in modeling_rope_utils models.llama.modeling_llama models.llama.configuration_llama models.gpt2.modeling_gpt2 models.gpt2.configuration_gpt2 models.mistral.configuration_mistral models.mistral.modeling_mistral models.qwen2.configuration_qwen2 models.qwen2.modeling_qwen2 modeling_utils configuration_utils cache_utils; do
python3 -c "import transformers.$m as m, inspect; print(inspect.getsource(m))" > $OUT/$m.py 2>&1
done
ls -la $OUT
