import inspect, transformers, torch
print(transformers.__version__, torch.__version__)
from transformers import LlamaConfig, Qwen2Config, MistralConfig, GPT2Config, PreTrainedModel
for C in (LlamaConfig, Qwen2Config, MistralConfig, GPT2Config):
    print(C.__name__, inspect.signature(C.__init__))
print(inspect.signature(PreTrainedModel.save_pretrained))
c = LlamaConfig(rope_scaling={"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,"original_max_position_embeddings":32}, rope_theta=500000.0)
print("llama via rope_scaling:", c.rope_parameters, getattr(c,'rope_scaling',None), getattr(c,'rope_theta',None))
c = LlamaConfig(rope_parameters={"rope_type":"llama3","rope_theta":500000.0,"factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,"original_max_position_embeddings":32})
print("llama via rope_parameters:", c.rope_parameters)
print(c.to_json_string())
c = Qwen2Config(); print("qwen2 default", c.to_json_string())
c = MistralConfig(); print("mistral default", c.to_json_string())
c = GPT2Config(); print("gpt2 default", c.to_json_string())
